"""Review and label scored answers: the local review app (app.py) and its queue (queue.py); the labels file it
writes is groundtrace.io.labels (labels.py keeps the path the docs show)."""
