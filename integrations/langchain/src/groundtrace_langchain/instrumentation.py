"""instrument() / uninstrument(): capture every LangChain run in the process, without code changes.

The core's capture kit (``groundtrace.capture.Instrumentor``) does the switching, the
GROUNDTRACE_ENABLED check and the Monitor's ownership; this module holds only the LangChain hook:
langchain-core's configure hook. For each hook, every time a callback manager is configured (each
runnable of each invocation), LangChain reads ``var.get()`` and adds that handler unless a handler
of ``handle_class`` is already there. Two details shape it:

- The "variable" is a process-wide slot, not a ContextVar: a ContextVar set in instrument() would
  be invisible to threads the application starts later (a Python thread begins with an empty
  context), so a threaded web server would capture nothing. LangChain only calls ``.get()`` on it.
- Hooks cannot be unregistered, so the hook is registered once and uninstrument() empties the slot:
  the hook is then inert (one attribute read per configure). With no ``env_var``, LangChain never
  constructs a handler itself; the one handler lives in the slot.

``handle_class`` is GroundtraceCallbackHandler, so a run that already has an explicit handler (passed
in ``callbacks``) is not captured twice.
"""

from __future__ import annotations

import sys
from typing import Any

from groundtrace.capture.carried import add_context_keys
from groundtrace.capture.kit import Instrumentor
from groundtrace.monitor import Monitor

from groundtrace_langchain.handler import GroundtraceCallbackHandler
from groundtrace_langchain.when_imported import when_imported

#: where LangChain keeps its configure hooks; its callback managers import it when a run is configured
TRACER_CONTEXT = "langchain_core.tracers.context"


class _HandlerSlot:
    """The process-wide stand-in for a ContextVar that register_configure_hook reads."""

    def __init__(self) -> None:
        self.handler: GroundtraceCallbackHandler | None = None

    def get(self, default: Any = None) -> GroundtraceCallbackHandler | None:
        return self.handler if self.handler is not None else default


class LangChainInstrumentor(Instrumentor):
    framework = "LangChain"
    hook_options = frozenset({"answer_key", "mask", "include_tools", "exclude_tools"})

    def __init__(self) -> None:
        super().__init__()
        self.slot = _HandlerSlot()
        self._hook_registered = False

    def _install(self, monitor: Monitor, **hook_options: Any) -> None:
        handler = GroundtraceCallbackHandler(monitor=monitor, **hook_options)  # answer_key, mask, tools
        if not self._hook_registered:
            self._hook_registered = True
            if TRACER_CONTEXT in sys.modules:
                self._register_hook()
            else:  # LangChain imports it (and langsmith, a third of a second) at its first run, not at start-up
                when_imported(TRACER_CONTEXT, self._register_hook)
        self.slot.handler = handler

    def _register_hook(self) -> None:
        from langchain_core.tracers.context import register_configure_hook

        # the slot stands in for the ContextVar the hook expects: LangChain only calls its get()
        register_configure_hook(self.slot, inheritable=True, handle_class=GroundtraceCallbackHandler)  # type: ignore[arg-type]

    def _remove(self) -> None:
        # runs in flight keep their handler to the end; what they submit to a closed Monitor is dropped
        self.slot.handler = None


_instrumentor = LangChainInstrumentor()


def instrument(**options: Any) -> Monitor | None:
    """Score every LangChain root run in this process; returns the Monitor that scores them.

    Defaults come from ``GROUNDTRACE_*`` (metrics, sinks, sample rate, queue, workers, options);
    keyword arguments override them: ``metrics``, ``sinks``, ``sample_rate``, ``queue_size``,
    ``workers``, ``metric_timeout_s``, ``options``, or ``monitor=`` to use your own Monitor, and
    ``answer_key`` and ``mask`` (a function ``str -> str`` applied to every captured text before
    any metric or sink sees it; with your own or the shared Monitor too), and ``include_tools`` /
    ``exclude_tools`` (tool names whose outputs may, or may not, be contexts). A second call returns
    the Monitor already in use. Returns None, doing nothing,
    when ``GROUNDTRACE_ENABLED`` is set to a false value (0/false/no/off). See
    ``groundtrace.capture.Instrumentor`` for who closes the Monitor. ``context_keys``: keys of a state or a
    prompt's variables that hold contexts beyond the words groundtrace knows (process-wide, as
    GROUNDTRACE_CONTEXT_KEYS).
    """
    context_keys = options.pop("context_keys", None)
    if context_keys is not None:
        add_context_keys(context_keys)
    return _instrumentor.instrument(**options)


def uninstrument() -> None:
    """Stop capturing; close the Monitor that instrument() built (not one passed as monitor=; the
    shared one only when no other integration still uses it)."""
    _instrumentor.uninstrument()


def instrumented_handler() -> GroundtraceCallbackHandler | None:
    """The handler instrument() installed, or None."""
    return _instrumentor.slot.handler
