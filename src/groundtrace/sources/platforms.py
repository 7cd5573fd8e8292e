"""What the three client-based sources (MLflow, LangSmith, Langfuse) share: their span kinds as
OpenInference kinds, the documents of a retriever's output, scores already written as EVALUATOR
views, and one error for a platform that cannot be reached."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from groundtrace.sources import SourceError
from groundtrace.sources.spans import Document, SpanView, documents_of

# the platforms' own names for kinds that OpenInference spells differently
_ALIASES = {"CHAT_MODEL": "LLM", "GENERATION": "LLM", "CHAT": "LLM", "PROMPT": "CHAIN", "PARSER": "CHAIN",
            "WORKFLOW": "CHAIN", "TASK": "CHAIN", "SPAN": "CHAIN", "EMBEDDINGS": "EMBEDDING"}
_KINDS = {"CHAIN", "RETRIEVER", "RERANKER", "LLM", "AGENT", "TOOL", "EMBEDDING", "EVALUATOR", "GUARDRAIL"}
# run metadata keys that name the conversation, in the order LangSmith reads them to group a thread
SESSION_METADATA_KEYS = ("session_id", "thread_id", "conversation_id")


def span_kind(raw: Any) -> str:
    """A platform's span/run/observation type (MLflow span_type, LangSmith run_type, Langfuse
    observation type) as an OpenInference kind in capitals; UNKNOWN when it names none."""
    kind = str(raw or "").upper()
    kind = _ALIASES.get(kind, kind)
    return kind if kind in _KINDS else "UNKNOWN"


def retrieved(kind: str, output: Any) -> list[Document]:
    """The documents of a retriever's or reranker's output (LangChain/LlamaIndex lists); other
    kinds carry none, whatever their output looks like (a prompt's formatted context is not a
    retrieval)."""
    return documents_of(output) if kind in ("RETRIEVER", "RERANKER") else []


def scored_views(trace_id: str, root_id: str | None, metrics: Iterable[str],
                 start: datetime | None = None) -> list[SpanView]:
    """The groundtrace scores a platform stores beside the trace (MLflow assessments, LangSmith
    feedback, Langfuse scores), shown to :func:`~groundtrace.sources.spans.assemble` as the
    EVALUATOR spans OpenInference would have: it lists their metrics under ``groundtrace.scored``
    and never takes them for the request."""
    return [SpanView(trace_id=trace_id, span_id=f"groundtrace-score-{i}", parent_id=root_id, kind="EVALUATOR",
                     name=metric, start_time=start, evaluation=metric)
            for i, metric in enumerate(sorted(set(metrics)))]


def metadata_session(metadata: Any) -> str | None:
    """The conversation a run's metadata names (LangSmith's thread keys), as text; None without one."""
    if not isinstance(metadata, dict):
        return None
    value = next((metadata[key] for key in SESSION_METADATA_KEYS if metadata.get(key)), None)
    return None if value is None else str(value)


def unreachable(platform: str, url: str | None, error: BaseException, fix: str) -> SourceError:
    """The error for a platform that did not answer: where we looked, what failed (first line
    only: SDK messages may carry credentials further down), and what to do."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return SourceError(f"{platform} at {url or '(default URL)'} could not be read "
                       f"({type(error).__name__}{': ' + first[:300] if first else ''}); {fix}")


__all__ = ["SESSION_METADATA_KEYS", "metadata_session", "retrieved", "scored_views", "span_kind", "unreachable"]
