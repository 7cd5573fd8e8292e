"""Review and label scored answers: the labels file (labels.py) and the local review app (app.py)."""
