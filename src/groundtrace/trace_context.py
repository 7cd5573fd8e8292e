"""Where a request lives in the tracing systems that are already loaded in this process.

Adapters read :func:`otel_ids` when a request's root run starts, and :func:`current_links` both
when it starts and when it ends, storing the merge (start wins) on the Record: a tracer whose
callback runs after the adapter's (MLflow's LangChain autolog) has opened its trace only by the
end. Sinks use the ids later, from a worker thread, to attach Scores to the right trace. Nothing
here imports a tracing SDK that the application has not imported itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: the trace link a Record carries the Phoenix project of its spans in (the Phoenix sink's configs go there)
PHOENIX_PROJECT_LINK = "phoenix_project"
_PROJECT_ATTRIBUTE = "openinference.project.name"


def phoenix_project(span: Any = None) -> str | None:
    """The Phoenix project ``span`` goes to (an SDK span knows its provider's resource), else the current span's,
    else the global tracer provider's; None without an SDK provider. Cheap, never raises, imports nothing."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        resource = getattr(span if span is not None else trace.get_current_span(), "resource", None)
        if resource is None:
            resource = getattr(trace.get_tracer_provider(), "resource", None)
        named = getattr(resource, "attributes", {}).get(_PROJECT_ATTRIBUTE) if resource is not None else None
    except Exception:
        return None
    return named if isinstance(named, str) and named else None


# Providers of ids in systems other than OpenTelemetry, keyed by the name sinks look them up by.
# Each takes no argument and returns an id or None; it must be cheap and must never raise.
_link_providers: dict[str, Callable[[], str | None]] = {}


def register_link_provider(name: str, provider: Callable[[], str | None]) -> None:
    _link_providers[name] = provider


def otel_ids(span: Any = None) -> tuple[str, str] | None:
    """(trace id, span id) in hex of ``span``, or of the current OpenTelemetry span; None if invalid."""
    if span is None:
        # the module itself, not an import statement (a `from` import of a submodule runs
        # importlib's Python code each time): this runs at every request's start
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:
            return None
        span = trace.get_current_span()
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def current_links() -> dict[str, str]:
    links = {}
    for name, provider in _link_providers.items():
        try:
            value = provider()
        except Exception:
            value = None
        if value:
            links[name] = value
    return links


def unregister_link_provider(name: str) -> None:
    _link_providers.pop(name, None)
