"""The OpenTelemetry trace a LlamaIndex request belongs to, so scores can be attached to it.

If the application has a span open when the request starts, the request is that span. If it has
none but has installed a real TracerProvider, the adapter records a span of its own,
``groundtrace.request``, covering the request, and the scores become its children. Nothing here
imports OpenTelemetry unless the application already has.
"""

from __future__ import annotations

import sys

from groundtrace.trace_context import otel_ids

REQUEST_SPAN_NAME = "groundtrace.request"
TRACER_NAME = "groundtrace_llamaindex"


def ids_in_context() -> tuple[str, str] | None:
    """(trace id, span id) of the OpenTelemetry span current right now, if there is a valid one."""
    return otel_ids()


def record_request_span(
    root_name: str, question: str, answer: str, start_ns: int, end_ns: int
) -> tuple[str, str] | None:
    """Record a finished ``groundtrace.request`` span with the global tracer; its ids, or None
    when no real TracerProvider is installed (the API's proxy and no-op providers record nothing).

    The span is written once the request has ended, with the request's own start and end times:
    a request that fails or is never read to the end leaves no empty span behind.
    """
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import context, trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    span = trace.get_tracer(TRACER_NAME).start_span(
        REQUEST_SPAN_NAME,
        context=context.Context(),  # a root of its own, whatever is current when the stream ends
        start_time=start_ns,
        attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": question,
            "output.value": answer,
            "groundtrace.llamaindex.root": root_name,
        },
    )
    span.end(end_time=end_ns)
    return otel_ids(span)
