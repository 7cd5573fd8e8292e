"""Scoring files and frames in batch: the engine, the stream over it (here or on Ray), DataFrames, backfills, the CI gate and its tally."""
