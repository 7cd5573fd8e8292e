"""When the process ends: every live Monitor settles what it holds, at exit and on SIGTERM.

``atexit`` closes the Monitors that asked for it (``Monitor(flush_at_exit=True)``, the default) within
:data:`EXIT_FLUSH_S`; each says at WARNING what it could not settle. SIGTERM (a container stopped, a deploy)
ends a process without running atexit: where the application has no SIGTERM handler of its own, one is
installed that does the same, then lets the signal do what it would have done.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from typing import Any

from groundtrace.redaction import get_logger

log = get_logger("groundtrace.monitor")

_live: weakref.WeakSet[Any] = weakref.WeakSet()
_exit_hook_installed = False


#: how long the Monitors get to settle what they hold when the process exits, or is sent SIGTERM
EXIT_FLUSH_S = 5.0


def register_exit_flush(monitor: Any) -> None:
    """Close ``monitor`` (a groundtrace Monitor) when the process exits or is sent SIGTERM."""
    global _exit_hook_installed
    _live.add(monitor)
    if not _exit_hook_installed:
        atexit.register(_close_all)
        _install_sigterm()
        _exit_hook_installed = True


def _close_all(timeout: float = EXIT_FLUSH_S) -> None:
    for monitor in list(_live):
        try:
            monitor.close(timeout=timeout)
        except Exception:
            pass


def _install_sigterm() -> None:
    """SIGTERM (a container stopped, a deploy) ends a process without running atexit: what the Monitors hold
    would be lost uncounted. Where the application has no handler of its own (its own one runs its exit path,
    which runs atexit), a handler settles them within :data:`EXIT_FLUSH_S`, says what was lost, then lets the
    signal do what it would have done."""
    import signal

    try:
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    import signal

    # on a thread of its own: the main thread may have been stopped holding a lock that close() takes
    closer = threading.Thread(target=_close_all, name="groundtrace-sigterm", daemon=True)
    closer.start()
    closer.join(EXIT_FLUSH_S + 2.0)
    if closer.is_alive():
        log.warning("groundtrace: SIGTERM: the Monitors did not settle within %.0f s; what they held is lost (their "
                    "counts as last logged)", EXIT_FLUSH_S)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
