"""The review app's labels file, as the docs show it imported: its format lives in groundtrace.io.labels."""

from groundtrace.io.labels import Decision, append, decide, read_decisions, read_labels

__all__ = ["Decision", "append", "decide", "read_decisions", "read_labels"]
