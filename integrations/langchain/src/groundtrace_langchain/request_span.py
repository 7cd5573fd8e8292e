"""The OpenTelemetry ids a root run's Record carries, so that sinks can attach scores to its trace.

OpenTelemetry stays optional: nothing here imports it unless the application (or an OTel sink)
already has. The adapter's own span is started but never made current: a root run's start and
end callbacks may run in different contexts (generators, async tasks), where attaching and
detaching a context would corrupt it.
"""

from __future__ import annotations

import sys
from typing import Any

from groundtrace.trace_context import otel_ids

SPAN_NAME = "groundtrace.request"
_TRACER_NAME = "groundtrace.langchain"
_tracer_cache: tuple[Any, Any] | None = None  # (provider, tracer): get_tracer is not free


def _sdk_tracer(trace: Any) -> Any:
    """The global tracer, if a real TracerProvider is installed (not the API's proxy or no-op)."""
    global _tracer_cache
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    cached = _tracer_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = provider.get_tracer(_TRACER_NAME)
    _tracer_cache = (provider, tracer)
    return tracer


def root_trace_ids(run_id: Any, run_name: str | None) -> tuple[tuple[str, str] | None, Any]:
    """(trace id, span id) for a root run starting now, and the span the adapter started, if any.

    The current span (the application's, or OpenInference's) is used when there is one; else, with
    an SDK installed, a new ``groundtrace.request`` span, which the caller must end."""
    # the module itself, not an import statement: this runs on every root run
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None, None
    ids = otel_ids(trace.get_current_span())
    if ids is not None:
        return ids, None
    tracer = _sdk_tracer(trace)
    if tracer is None:
        return None, None
    span = tracer.start_span(SPAN_NAME, kind=trace.SpanKind.INTERNAL, attributes={
        "openinference.span.kind": "CHAIN",
        "groundtrace.run_id": str(run_id),
        "groundtrace.run_name": run_name or "",
    })
    return otel_ids(span), span


def end_request_span(span: Any, error: BaseException | None = None) -> None:
    if span is None:
        return
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:200]))
    span.end()
