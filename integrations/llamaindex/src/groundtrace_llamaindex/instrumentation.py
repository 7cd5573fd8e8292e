"""instrument() / uninstrument(): attach the handlers to LlamaIndex's root dispatcher, and detach them.

Every LlamaIndex dispatcher propagates to the root one, so two handlers there see every span and
event of the process. The core's capture kit (``groundtrace.capture.Instrumentor``) does the
switching, the GROUNDTRACE_ENABLED check and the Monitor's ownership; this module holds the hooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groundtrace.capture.carried import add_context_keys
from groundtrace.capture.kit import Instrumentor
from groundtrace.monitor import Monitor
from groundtrace.privacy import Mask
from groundtrace.capture.turn import ToolFilter
from groundtrace.capture.stats import CaptureStats
from llama_index.core.instrumentation import get_dispatcher

from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler
from groundtrace_llamaindex.run import EVERY_TOOL
from groundtrace_llamaindex.tracker import RootTracker


class LlamaIndexInstrumentor(Instrumentor):
    framework = "LlamaIndex"
    hook_options = frozenset({"mask", "tools"})

    def __init__(self) -> None:
        super().__init__()
        self.handlers: tuple[GroundtraceSpanHandler, GroundtraceEventHandler] | None = None

    def _install(self, monitor: Monitor, **hook_options: Any) -> None:
        tracker = RootTracker(monitor, mask=hook_options.get("mask"), tools=hook_options.get("tools", EVERY_TOOL))
        span_handler, event_handler = GroundtraceSpanHandler(tracker), GroundtraceEventHandler(tracker=tracker)
        dispatcher = get_dispatcher()
        # new lists rather than in-place appends: a thread iterating the old list is not disturbed
        dispatcher.span_handlers = [*dispatcher.span_handlers, span_handler]
        dispatcher.event_handlers = [*dispatcher.event_handlers, event_handler]
        self.handlers = (span_handler, event_handler)

    def _remove(self) -> None:
        if self.handlers is None:
            return
        span_handler, event_handler = self.handlers
        self.handlers = None
        dispatcher = get_dispatcher()
        dispatcher.span_handlers = [h for h in dispatcher.span_handlers if h is not span_handler]
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not event_handler]
        span_handler.close()  # stops the tracker


_instrumentor = LlamaIndexInstrumentor()


def tool_names(option: str, names: Iterable[str] | None) -> list[str] | None:
    """A list of tool names, or a TypeError naming the option (a bare string is a common slip)."""
    if names is None:
        return None
    found = None if isinstance(names, str) else list(names)
    if found is None or not all(isinstance(name, str) for name in found):
        raise TypeError(f"instrument(): {option} must be a list of tool names, got {names!r}")
    return found


def instrument(metrics: Any = None, sinks: Any = None, monitor: Monitor | None = None, mask: Mask | None = None,
               include_tools: Iterable[str] | None = None, exclude_tools: Iterable[str] | None = None,
               context_keys: Iterable[str] | None = None, **monitor_options: Any) -> Monitor | None:
    """Score every LlamaIndex query and chat of this process; returns the Monitor that scores them.

    ``monitor``: an existing Monitor (its owner closes it). Otherwise ``metrics``, ``sinks`` and
    Monitor options (``sample_rate``, ``queue_size``, ``workers``, ``metric_timeout_s``,
    ``options``) override the ``GROUNDTRACE_*`` environment; with none of them, the process-wide
    ``groundtrace.capture.shared_monitor()`` is used. ``mask``: a function ``str -> str`` applied
    to every captured question, context and answer before any metric or sink sees it, whichever
    Monitor scores them (it goes with each Record; groundtrace.privacy). Calling it again while instrumented changes
    nothing and returns the Monitor in use: call uninstrument() first to change the setup. Returns
    None, doing nothing, when ``GROUNDTRACE_ENABLED`` is set to a false value (0/false/no/off).
    ``include_tools`` / ``exclude_tools``: tool names whose outputs may (only these) / may not be
    contexts (an agent's clock or calculator, say); a list, checked here. ``context_keys``: keys of a prompt's
    variables or a workflow's output that hold contexts beyond the words groundtrace knows (process-wide, as
    GROUNDTRACE_CONTEXT_KEYS).
    """
    if context_keys is not None:
        add_context_keys(context_keys)
    include, exclude = tool_names("include_tools", include_tools), tool_names("exclude_tools", exclude_tools)
    hooks: dict[str, Any] = {} if mask is None else {"mask": mask}
    if include is not None or exclude is not None:
        hooks["tools"] = ToolFilter.of(include, exclude)
    return _instrumentor.instrument(metrics=metrics, sinks=sinks, monitor=monitor, **hooks, **monitor_options)


def uninstrument() -> None:
    """Detach the handlers; a Monitor built by instrument() (own or shared) is flushed and closed."""
    _instrumentor.uninstrument()


def is_instrumented() -> bool:
    return _instrumentor.is_instrumented


def stats() -> CaptureStats:
    """Where the turns captured since instrument() went: recorded, or not and why (``no_record``,
    one count per reason); all zero when not instrumented."""
    handlers = _instrumentor.handlers
    if handlers is None or handlers[0].tracker is None:
        return CaptureStats()
    return handlers[0].tracker.stats()
