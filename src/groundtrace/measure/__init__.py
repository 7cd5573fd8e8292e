"""Measuring metrics against labels: the bench, classification figures, labelled input, training provenance, synthetic hallucinations."""
