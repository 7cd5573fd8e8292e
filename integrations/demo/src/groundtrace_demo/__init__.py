"""groundtrace-demo: `groundtrace demo`, real RAG applications with groundtrace attached, over a bundled corpus.

A LangChain LCEL chain answers the English customer-support questions and a LlamaIndex query
engine the Russian student-services ones; groundtrace is attached to each with one line, scores
every answer in the background with offline metrics and puts the scores on OpenTelemetry spans,
on MLflow traces (when mlflow is installed) and in scores.jsonl. See runner.py.

groundtrace's command line finds the command through this distribution's entry point in the group
groundtrace.commands (cli.py); the core package imports no framework and nothing of this one.
"""

from __future__ import annotations

import importlib.util


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False
