"""The span another tracer opened for a LlamaIndex root: where groundtrace's scores belong when the app is traced.

LlamaIndex's dispatcher gives every span handler the same span id, so a tracer's span of the root is found by
that id in the tracer's own map: OpenInference's ``LlamaIndexInstrumentor`` (Phoenix, Arize) keeps
``open_spans[id_]``, a span whose OpenTelemetry span is ``_otel_span``. Its span is current only between its
own enter and exit, and groundtrace's handler may run before it at the root's start and after it at the root's
end: so the map is read at the root's first child (every handler has opened the root's span by then) and,
for a root with no child, when the root ends.
"""

from __future__ import annotations

import sys
from typing import Any

from groundtrace.trace_context import otel_ids


def tracer_span_ids(span_id: str) -> tuple[str, str] | None:
    """(trace id, span id) of the OpenTelemetry span a tracer among the root dispatcher's span handlers opened for
    the LlamaIndex span ``span_id``, or None."""
    instrumentation = sys.modules.get("llama_index.core.instrumentation")
    if instrumentation is None:
        return None
    for handler in getattr(instrumentation.get_dispatcher(), "span_handlers", ()):
        spans: Any = getattr(handler, "open_spans", None)
        otel_span = getattr(spans.get(span_id), "_otel_span", None) if isinstance(spans, dict) else None
        if otel_span is not None and (ids := otel_ids(otel_span)) is not None:
            return ids
    return None
