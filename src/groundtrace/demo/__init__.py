"""`groundtrace demo`: real RAG applications with groundtrace attached, over a bundled corpus.

A LangChain LCEL chain answers the English customer-support questions and a LlamaIndex query
engine the Russian student-services ones; groundtrace is attached to each with one line, scores
every answer in the background with offline metrics and puts the scores on OpenTelemetry spans,
on MLflow traces (when mlflow is installed) and in scores.jsonl. See runner.py.

This package is the one place in src/groundtrace that imports LangChain and LlamaIndex, and only
in langchain_app.py and llamaindex_app.py, which nothing imports before the demo runs.
"""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install -e . -e 'integrations/langchain[otel]' -e 'integrations/llamaindex[otel]'  (or: make demo)"
# module -> the distribution that provides it
REQUIRED = {
    "langchain_core": "langchain-core",
    "groundtrace_langchain": "groundtrace-langchain",
    "llama_index.core": "llama-index-core",
    "groundtrace_llamaindex": "groundtrace-llamaindex",
}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def missing_requirements() -> list[str]:
    """Distributions the RAG demo needs that are not installed."""
    return [dist for module, dist in REQUIRED.items() if not installed(module)]
