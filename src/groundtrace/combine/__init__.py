"""One calibrated verdict from several metrics' values (the ``combined`` metric), fitted to labels.

- :mod:`groundtrace.backends.verdict`: the fitted file (components, a logistic model over their values,
  a threshold, optionally a cascade to a costly metric) and how it turns values into a probability.
  numpy only: scoring never needs scikit-learn.
- :mod:`groundtrace.combine.fitting`: fitting that file on labelled records (scikit-learn), with
  cross-validated figures, bootstrap intervals and a learning curve (``groundtrace fit``);
- :mod:`groundtrace.combine.labels`: the metrics' values on a labelled file, scored or read back.
- :mod:`groundtrace.io.label_values`: a person's label as the platforms keep it (a boolean, a number, a
  category) turned into fit's 0/1; :mod:`groundtrace.io.labelled` joins labels with records.
"""
