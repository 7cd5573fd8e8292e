"""The spans other tracers made for a LangChain run: where groundtrace's scores belong when the app is traced.

A tracer that is a LangChain callback keeps a map from run id to its span, and may or may not make that
span current (OpenInference never does: its spans are not in the OpenTelemetry context other callbacks
see). So the root run's span is looked up in each tracer's own map, by attribute, without importing the
tracer's package:

- OpenInference (Phoenix, Arize): ``OpenInferenceTracer._spans_by_run[run_id]``, an OpenTelemetry span;
  ``LangChainInstrumentor().instrument()`` keeps its tracer on the instrumentor, a singleton.
- OpenLLMetry (``opentelemetry-instrumentation-langchain``): ``TraceloopCallbackHandler.spans[run_id].span``.
- MLflow autolog: ``MlflowLangchainTracer._run_span_mapping[str(run_id)].span``, a LiveSpan whose
  ``trace_id`` is MLflow's own ("tr-..."): a trace link for the MLflow sink.
- Langfuse's ``CallbackHandler`` (class ``LangchainCallbackHandler``): ``_runs[run_id]``, an observation with Langfuse's ``trace_id`` and ``id``:
  a trace link for the Langfuse sink.

LangSmith's tracer names its runs by LangChain's own run ids, which the Record carries already.
A map is read while the run is open: at the root's first child event (every tracer has opened the root's
span by then, whatever the handlers' order) and at its end.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from groundtrace.trace_context import PHOENIX_PROJECT_LINK, otel_ids, phoenix_project

#: trace_links keys (the sinks read them): MLflow's trace id, and Langfuse's "trace id/observation id"
MLFLOW_LINK, LANGFUSE_LINK = "mlflow", "langfuse"


class Found:
    """What the tracers know of one run: OpenTelemetry ids of a span some exporter sends, and links."""

    __slots__ = ("ids", "links")

    def __init__(self) -> None:
        self.ids: tuple[str, str] | None = None
        self.links: dict[str, str] = {}


def _filed(mapping: Any, run_ids: tuple[Any, ...]) -> Any:
    """What a tracer's map holds for the run, under any of the forms of its id (LangServe's runs are strings)."""
    if not isinstance(mapping, Mapping):
        return None
    for run_id in run_ids:
        try:
            found = mapping.get(run_id)
        except TypeError:  # an id of a type the map cannot hash
            continue
        if found is not None:
            return found
    return None


def _openinference(handler: Any, run_ids: tuple[Any, ...]) -> Any:
    return _filed(getattr(handler, "_spans_by_run", None), run_ids)


def _openllmetry(handler: Any, run_ids: tuple[Any, ...]) -> Any:
    return getattr(_filed(getattr(handler, "spans", None), run_ids), "span", None)


_TRACER_CLASSES = {"OpenInferenceTracer": "openinference", "TraceloopCallbackHandler": "openllmetry",
                   "MlflowLangchainTracer": "mlflow"}
_kinds: dict[type, str | None] = {}  # handler class -> which tracer it is (classes are few; asked once per root)


def _kind(handler: Any) -> str | None:
    kind_of = type(handler)
    if kind_of not in _kinds:
        named = next((_TRACER_CLASSES[k.__name__] for k in kind_of.__mro__ if k.__name__ in _TRACER_CLASSES), None)
        if named is None and kind_of.__module__.startswith("langfuse.") and hasattr(handler, "_runs"):
            named = "langfuse"
        _kinds[kind_of] = named
    return _kinds[kind_of]


def _global_openinference_tracer() -> Any:
    """The tracer of ``LangChainInstrumentor().instrument()``, if that ran (it adds the tracer to every
    callback manager made afterwards, but a run the handler sees with no child has no manager to read)."""
    module = sys.modules.get("openinference.instrumentation.langchain")
    instrumentor = getattr(getattr(module, "LangChainInstrumentor", None), "_instance", None)
    return getattr(instrumentor, "_tracer", None)


def tracer_spans(handlers: Iterable[Any], run_ids: tuple[Any, ...]) -> Found:
    """The ids and links the tracers among ``handlers`` (and OpenInference's global one) hold for the run whose
    id, in each form it may have been filed under, is in ``run_ids``."""
    found = Found()
    candidates = list(handlers)
    if (global_tracer := _global_openinference_tracer()) is not None and global_tracer not in candidates:
        candidates.append(global_tracer)
    for handler in candidates:
        kind = _kind(handler)
        if kind is None:  # most handlers: the application's own, groundtrace's
            continue
        if kind == "openinference":
            span = _openinference(handler, run_ids)
        elif kind == "openllmetry":
            span = _openllmetry(handler, run_ids)
        elif kind == "mlflow":
            mapped = _filed(getattr(handler, "_run_span_mapping", None), tuple(str(run_id) for run_id in run_ids))
            trace_id = getattr(getattr(mapped, "span", None), "trace_id", None)
            if isinstance(trace_id, str) and trace_id:
                found.links[MLFLOW_LINK] = trace_id
            continue
        else:  # langfuse
            observation = _filed(getattr(handler, "_runs", None), run_ids)
            trace_id, span_id = getattr(observation, "trace_id", None), getattr(observation, "id", None)
            if isinstance(trace_id, str) and isinstance(span_id, str):
                found.links[LANGFUSE_LINK] = f"{trace_id}/{span_id}"
            continue
        ids = otel_ids(span) if span is not None else None
        if ids is not None and found.ids is None:
            found.ids = ids
            # the project the span goes to (its provider's, which may not be the global one): the Phoenix sink's
            if (project := phoenix_project(span)) is not None:
                found.links[PHOENIX_PROJECT_LINK] = project
    return found


def config_handlers(config: Any) -> list[Any]:
    """The handlers of a runnable config's callback manager (a child run's config names its parent's)."""
    callbacks = config.get("callbacks") if isinstance(config, dict) else None
    handlers = getattr(callbacks, "handlers", None)
    return list(handlers) if handlers else []
