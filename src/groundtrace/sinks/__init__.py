"""Sinks deliver Scores to where engineers look: the trace of the request, or a file.

A sink is a small class with ``emit(record, scores)``; it reads Records and Scores and never
imports metrics. Each lives in its own module and imports its SDK lazily, so choosing a sink by
name (``GROUNDTRACE_SINKS=otel,jsonl``) costs nothing for the sinks not chosen.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from groundtrace.record import Record
from groundtrace.score import Score


class Sink:
    name: ClassVar[str]

    def emit(self, record: Record, scores: list[Score]) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Deliver anything buffered."""

    def close(self) -> None:
        self.flush()


_BUILTIN = {
    "jsonl": "groundtrace.sinks.jsonl:JsonlSink",
    "otel": "groundtrace.sinks.otel:OTelSink",
    "langsmith": "groundtrace.sinks.langsmith:LangSmithSink",
    "mlflow": "groundtrace.sinks.mlflow:MLflowSink",
    "phoenix": "groundtrace.sinks.phoenix:PhoenixSink",
    "langfuse": "groundtrace.sinks.langfuse:LangfuseSink",
}


def sink_names() -> list[str]:
    return sorted(_BUILTIN)


def sink_class(name: str) -> type[Sink]:
    target = _BUILTIN.get(name)
    if target is None:
        raise KeyError(f"unknown sink '{name}'; available: {', '.join(sink_names())}")
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def build_sinks(spec: Sequence[str | Sink] | str | None) -> list[Sink]:
    """Sink instances from names (configured from their environment variables) or instances."""
    if spec is None:
        return []
    if isinstance(spec, str):
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    return [sink_class(s)() if isinstance(s, str) else s for s in spec]


T = TypeVar("T")


def retry_with_backoff(
    call: Callable[[], T],
    *,
    attempts: int,
    backoff_s: float,
    retryable: Callable[[Exception], bool],
    before_retry: Callable[[], None] | None = None,
) -> T:
    """``call()``, tried up to ``attempts`` times while its error is ``retryable``, sleeping
    ``backoff_s``, then twice that, and so on between tries. The last error propagates."""
    for attempt in range(max(1, attempts)):
        try:
            return call()
        except Exception as error:
            if attempt + 1 >= attempts or not retryable(error):
                raise
        if before_retry is not None:
            before_retry()
        time.sleep(backoff_s * 2**attempt)
    raise AssertionError("unreachable")


def score_label(score: Score) -> str:
    """A low-cardinality label for trace UIs: 'hallucinated', 'grounded', 'error' or 'unknown'."""
    if score.error is not None:
        return "error"
    if score.hallucinated is None:
        return "unknown"
    return "hallucinated" if score.hallucinated else "grounded"


def spans_summary(score: Score, limit: int = 20) -> list[dict[str, Any]]:
    return [span.model_dump(exclude_none=True) for span in score.spans[:limit]]


__all__ = ["Sink", "build_sinks", "retry_with_backoff", "score_label", "sink_class", "sink_names", "spans_summary"]
