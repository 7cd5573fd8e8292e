"""instrument() / uninstrument(): attach the handlers to LlamaIndex's root dispatcher, and detach them.

Every LlamaIndex dispatcher propagates to the root one, so two handlers there see every span and
event of the process.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from groundtrace.config import Settings, acquire_shared_monitor, release_shared_monitor
from groundtrace.monitor import Monitor
from llama_index.core.instrumentation import get_dispatcher

from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler
from groundtrace_llamaindex.tracker import RootTracker

log = logging.getLogger("groundtrace.llamaindex")


@dataclass
class _Installed:
    monitor: Monitor
    ownership: str  # "caller": theirs to close; "own": built here; "shared": config.shared_monitor()
    span_handler: GroundtraceSpanHandler
    event_handler: GroundtraceEventHandler


_lock = threading.Lock()
_installed: _Installed | None = None


def instrument(metrics: Any = None, sinks: Any = None, monitor: Monitor | None = None,
               **monitor_options: Any) -> Monitor:
    """Score every LlamaIndex query and chat of this process; returns the Monitor that scores them.

    ``monitor``: an existing Monitor (its owner closes it). Otherwise ``metrics``, ``sinks`` and
    Monitor options (``sample_rate``, ``queue_size``, ``workers``, ``metric_timeout_s``,
    ``options``) override the ``GROUNDTRACE_*`` environment; with none of them, the process-wide
    ``groundtrace.config.shared_monitor()`` is used. Calling it again while instrumented changes
    nothing and returns the Monitor in use: call uninstrument() first to change the setup.
    """
    global _installed
    if monitor is not None and (metrics is not None or sinks is not None or monitor_options):
        raise ValueError("instrument(): pass either monitor= or metrics/sinks/Monitor options, not both")
    with _lock:
        if _installed is not None:
            log.debug("groundtrace: LlamaIndex is already instrumented; keeping the current Monitor")
            return _installed.monitor
        if monitor is not None:
            ownership = "caller"
        elif metrics is None and sinks is None and not monitor_options:
            monitor, ownership = acquire_shared_monitor(), "shared"
        else:
            overrides = {key: value for key, value in (("metrics", metrics), ("sinks", sinks)) if value is not None}
            monitor, ownership = Settings.from_env().monitor(**overrides, **monitor_options), "own"
        tracker = RootTracker(monitor)
        installed = _Installed(monitor, ownership, GroundtraceSpanHandler(tracker), GroundtraceEventHandler(tracker))
        dispatcher = get_dispatcher()
        # new lists rather than in-place appends: a thread iterating the old list is not disturbed
        dispatcher.span_handlers = [*dispatcher.span_handlers, installed.span_handler]
        dispatcher.event_handlers = [*dispatcher.event_handlers, installed.event_handler]
        _installed = installed
        return monitor


def uninstrument() -> None:
    """Detach the handlers; a Monitor built by instrument() (own or shared) is flushed and closed."""
    global _installed
    with _lock:
        installed, _installed = _installed, None
        if installed is None:
            return
        dispatcher = get_dispatcher()
        dispatcher.span_handlers = [h for h in dispatcher.span_handlers if h is not installed.span_handler]
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not installed.event_handler]
        installed.span_handler.tracker.close()
    if installed.ownership == "own":
        installed.monitor.close()
    elif installed.ownership == "shared":
        release_shared_monitor()


def is_instrumented() -> bool:
    return _installed is not None
