"""instrument() / uninstrument(): capture every LangChain run in the process, without code changes.

The route is langchain-core's configure hook: for each hook, every time a callback manager is
configured (each runnable of each invocation), LangChain reads ``var.get()`` and adds that handler
unless a handler of ``handle_class`` is already there. Two details shape this module:

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

import logging
import os
import threading
from typing import Any

from groundtrace.config import Settings, acquire_shared_monitor, release_shared_monitor

from groundtrace_langchain.handler import GroundtraceCallbackHandler

log = logging.getLogger("groundtrace.langchain")
_OFF = {"0", "false", "no", "off"}


class _HandlerSlot:
    """The process-wide stand-in for a ContextVar that register_configure_hook reads."""

    def __init__(self) -> None:
        self.handler: GroundtraceCallbackHandler | None = None

    def get(self, default: Any = None) -> GroundtraceCallbackHandler | None:
        return self.handler if self.handler is not None else default


_slot = _HandlerSlot()
_lock = threading.Lock()
_hook_registered = False
_owned_monitor: Any = None
_uses_shared_monitor = False


def instrument(**options: Any) -> GroundtraceCallbackHandler | None:
    """Score every LangChain root run in this process; returns the global handler.

    Defaults come from ``GROUNDTRACE_*`` (metrics, sinks, sample rate, queue, workers, options);
    keyword arguments override them: ``metrics``, ``sinks``, ``sample_rate``, ``queue_size``,
    ``workers``, ``metric_timeout_s``, ``options``, or ``monitor=`` to use your own Monitor, and
    ``answer_key``. A second call returns the handler already installed. Returns None, doing
    nothing, when ``GROUNDTRACE_ENABLED`` is set to a false value (0/false/no/off): code may call
    instrument() unconditionally and an environment can still turn it off.
    """
    global _hook_registered, _owned_monitor, _uses_shared_monitor
    if os.environ.get("GROUNDTRACE_ENABLED", "").strip().lower() in _OFF:
        log.info("groundtrace: GROUNDTRACE_ENABLED is off: LangChain runs are not captured")
        return None
    with _lock:
        if _slot.handler is not None:
            if options:
                log.warning("groundtrace: already instrumented; call uninstrument() first to change %s",
                            ", ".join(sorted(options)))
            return _slot.handler
        answer_key = options.pop("answer_key", None)
        monitor = options.pop("monitor", None)
        if monitor is None and not options:
            # the process-wide Monitor from GROUNDTRACE_*: shared with groundtrace-llamaindex
            monitor, _uses_shared_monitor = acquire_shared_monitor(), True
        elif monitor is None:
            monitor = _owned_monitor = Settings.from_env().monitor(**options)
        elif options:
            raise ValueError(f"pass either monitor= or Monitor options, not both (got {', '.join(sorted(options))})")
        handler = GroundtraceCallbackHandler(monitor=monitor, answer_key=answer_key)
        if not _hook_registered:
            # imported here: it loads langsmith, which `import groundtrace_langchain` need not pay for
            from langchain_core.tracers.context import register_configure_hook

            register_configure_hook(_slot, inheritable=True, handle_class=GroundtraceCallbackHandler)  # type: ignore[arg-type]
            _hook_registered = True
        _slot.handler = handler
        log.info("groundtrace: capturing LangChain runs (metrics: %s)", ", ".join(m.name for m in monitor.metrics))
        return handler


def uninstrument() -> None:
    """Stop capturing; close the Monitor that instrument() built (not one passed as monitor=; the
    shared one only when no other integration still uses it).

    Runs in flight keep their handler to the end; what they submit to a closed Monitor is counted
    as dropped."""
    global _owned_monitor, _uses_shared_monitor
    with _lock:
        _slot.handler = None
        monitor, _owned_monitor = _owned_monitor, None
        shared, _uses_shared_monitor = _uses_shared_monitor, False
    if monitor is not None:
        monitor.close()
    if shared:
        release_shared_monitor()


def instrumented_handler() -> GroundtraceCallbackHandler | None:
    """The handler instrument() installed, or None."""
    return _slot.handler
