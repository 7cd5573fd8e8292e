"""Sinks deliver Scores to where engineers look: the trace of the request, or a file.

A sink is a small class with ``emit(record, scores)``; it reads Records and Scores and never
imports metrics. Each lives in its own module and imports its SDK lazily, so choosing a sink by
name (``GROUNDTRACE_SINKS=otel,jsonl``) costs nothing for the sinks not chosen. A sink built by
name gets the :class:`~groundtrace.config.Settings` (``from_settings``). A sink whose trace
system has ids of its own (MLflow's ``tr-...``) names its lookup in ``trace_link``; the Monitor
and the capture kit register it with ``trace_context`` (:func:`register_trace_links`) before a
request is captured, never an import.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from groundtrace import trace_context
from groundtrace.config import Settings
from groundtrace.record import Record
from groundtrace.score import Score

log = logging.getLogger("groundtrace.sinks")


class Sink:
    name: ClassVar[str]
    #: (link name, lookup of the current request's id) for a trace system whose ids are not
    #: OpenTelemetry's; the lookup must be cheap and must never raise
    trace_link: ClassVar[tuple[str, Callable[[], str | None]] | None] = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Sink:
        """The sink as ``GROUNDTRACE_SINKS`` names it, configured from ``settings``."""
        return cls()

    def emit(self, record: Record, scores: list[Score]) -> None:
        raise NotImplementedError

    def undeliverable(self) -> str | None:
        """Why this sink cannot deliver anything from this process, and what to set (None: it can).
        A command line asks before it scores, rather than scoring into nowhere."""
        return None

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


def _names(spec: Sequence[str | Sink] | str | None) -> list[str | Sink]:
    if spec is None:
        return []
    if isinstance(spec, str):
        return [s.strip() for s in spec.split(",") if s.strip()]
    return list(spec)


def build_sinks(spec: Sequence[str | Sink] | str | None, settings: Settings | None = None) -> list[Sink]:
    """Sink instances from names (configured from ``settings``, else the environment) or instances."""
    spec = _names(spec)
    if settings is None and any(isinstance(s, str) for s in spec):
        settings = Settings.from_env()
    return [sink_class(s).from_settings(settings) if isinstance(s, str) else s for s in spec]


def register_trace_links(spec: Sequence[str | Sink] | str | None) -> None:
    """Register with trace_context the link lookups of these sinks (names or instances), so that
    the Records captured from now on carry their trace ids. Registering twice is harmless."""
    for sink in _names(spec):
        link = (sink_class(sink) if isinstance(sink, str) else sink).trace_link
        if link is not None:
            trace_context.register_link_provider(*link)


def emit_all(sinks: Sequence[Sink], record: Record, scores: list[Score]) -> int:
    """Hand one record's Scores to every sink; a sink that fails is logged, never raised. Returns
    how many failed."""
    failed = 0
    for sink in sinks:
        try:
            sink.emit(record, scores)
        except Exception as error:
            failed += 1
            log.warning("groundtrace: sink %s failed for record %s: %s", getattr(sink, "name", sink), record.id, error)
    return failed


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


__all__ = ["Sink", "build_sinks", "emit_all", "register_trace_links", "retry_with_backoff", "score_label", "sink_class", "sink_names", "spans_summary"]
