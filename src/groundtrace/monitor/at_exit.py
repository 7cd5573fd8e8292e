"""When the process ends or forks: every live Monitor settles what it holds at exit and on SIGTERM, and starts
anew in a forked child.

``atexit`` closes the Monitors that asked for it (``Monitor(flush_at_exit=True)``, the default), each within its
``exit_flush_s`` (``GROUNDTRACE_EXIT_FLUSH_S``, default :data:`EXIT_FLUSH_S`): the wait ends as soon as every
record is settled, and each Monitor says at WARNING what it could not settle. SIGTERM (a container stopped, a
deploy) ends a process without running atexit: where the application has no SIGTERM handler of its own, one is
installed that does the same, then lets the signal do what it would have done; where the handler is a uvicorn
server's (which ends the process before atexit), the Monitors settle at the end of its shutdown
(groundtrace.monitor.server_exit).

A child forked with Monitors built (``gunicorn --preload``, ``multiprocessing`` with fork, Celery's prefork pool)
inherits no thread and no scoring process: each Monitor starts empty there, and starts its workers with the
first record the child submits (the parent's records stay the parent's to settle and report). The child does not
keep the parent's SIGTERM handler (a pool's ``terminate()`` is not delayed by it); one is installed again when a
Monitor starts there. A ``multiprocessing`` or ``billiard`` child ends with ``os._exit``, which skips atexit:
its Monitors are closed by the pool's own exit hook instead.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from typing import Any

from groundtrace.config import DEFAULT_EXIT_FLUSH_S
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.monitor")

#: how long (at most) the Monitors get to settle what they hold when the process exits or is sent SIGTERM,
#: unless GROUNDTRACE_EXIT_FLUSH_S or Monitor(exit_flush_s=) says otherwise
EXIT_FLUSH_S = DEFAULT_EXIT_FLUSH_S
#: at exit, a sink whose emit() has run this long without returning is not waited for (nothing progresses)
EXIT_STALL_S = 3.0

_live: weakref.WeakSet[Any] = weakref.WeakSet()  # those to close at exit
_built: weakref.WeakSet[Any] = weakref.WeakSet()  # every Monitor, to start anew in a forked child
_exit_hook_installed = False
_sigterm_ours = False
_pool_hooks: set[str] = set()  # the process pools whose exit hook closes this process's Monitors
_fork_hook_installed = False


def register_for_fork(monitor: Any) -> None:
    """Start ``monitor`` anew in a child this process forks (every Monitor is)."""
    global _fork_hook_installed
    _built.add(monitor)
    if not _fork_hook_installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_installed = True


def register_exit_flush(monitor: Any) -> None:
    """Close ``monitor`` (a groundtrace Monitor) when the process exits or is sent SIGTERM."""
    global _exit_hook_installed
    _live.add(monitor)
    if not _exit_hook_installed:
        atexit.register(_close_all)
        _install_sigterm()
        _exit_hook_installed = True
    _hook_pool_exit()  # a pool's worker (uvicorn's, multiprocessing's) ends without atexit


def arm_in_child(monitor: Any) -> None:
    """A Monitor starts in a forked child: its exit paths there (SIGTERM, and a process pool's exit hook)."""
    if monitor in _live:
        _install_sigterm()
        _hook_pool_exit()


def _close_all() -> None:
    monitors = list(_live)
    try:  # side by side: each gets its own time, none waits behind another
        closers = [threading.Thread(target=_close_one, args=(m,), name="groundtrace-exit", daemon=True)
                   for m in monitors]
        for closer in closers:
            closer.start()
    except RuntimeError:  # an interpreter that starts no thread at exit: one after another, each bounded
        for monitor in monitors:
            _close_one(monitor)
        return
    for closer, monitor in zip(closers, monitors, strict=True):
        closer.join(_exit_bound(monitor) + 2.0)


def _close_one(monitor: Any) -> None:
    try:  # the exit waits while the sinks deliver, not for one whose emit() never returns
        monitor.close(timeout=_exit_bound(monitor), stall_s=EXIT_STALL_S)
    except Exception:
        pass


def _exit_bound(monitor: Any) -> float:
    return float(getattr(monitor, "exit_flush_s", EXIT_FLUSH_S))


def _install_sigterm() -> None:
    """SIGTERM (a container stopped, a deploy) ends a process without running atexit: what the Monitors hold
    would be lost uncounted. Where the application has no handler of its own (its own one runs its exit path,
    which runs atexit), a handler settles them within their bound, says what was lost, then lets the signal do
    what it would have done."""
    global _sigterm_ours
    import signal

    from groundtrace.monitor.server_exit import settle_in_server_shutdown

    try:
        current = signal.getsignal(signal.SIGTERM)
        if threading.current_thread() is threading.main_thread() and current is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            _sigterm_ours = True
        elif callable(current):  # a server's own handler: uvicorn's ends the process before atexit
            settle_in_server_shutdown(current, _close_all)
    except (ValueError, OSError, AttributeError):
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    import signal

    # on a thread of its own: the main thread may have been stopped holding a lock that close() takes
    closer = threading.Thread(target=_close_all, name="groundtrace-sigterm", daemon=True)
    closer.start()
    bound = max((_exit_bound(m) for m in list(_live)), default=0.0)
    closer.join(bound + 4.0)
    if closer.is_alive():
        log.warning("groundtrace: SIGTERM: the Monitors did not settle within %.0f s; what they held is lost (their "
                    "counts as last logged)", bound)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _hook_pool_exit() -> None:
    """A worker of a multiprocessing (or Celery's billiard) pool ends with os._exit, after the pool runs its
    finalizers: one of them closes this process's Monitors. A worker started by forkserver or spawn imports the
    application (and builds its Monitors) before it is a worker, and becoming one clears the finalizers: there the
    hook is put in place when the process starts its work (the library's after-fork callbacks run then)."""
    for name in ("multiprocessing", "billiard"):
        if name in _pool_hooks or name not in sys.modules:
            continue
        try:
            util = __import__(f"{name}.util", fromlist=["Finalize"])
            process = __import__(f"{name}.process", fromlist=["current_process"])
            if name not in _start_hooks:  # where this process is not a worker yet, it may become one
                util.register_after_fork(_START_ANCHOR, _on_worker_start)
                _start_hooks.add(name)
            if process.current_process().name == "MainProcess":
                continue  # not a pool's worker: atexit runs here
            util.Finalize(None, _close_all, exitpriority=100)
            _pool_hooks.add(name)
        except Exception as error:
            log.debug("groundtrace: no exit hook in the %s pool: %s", name, error)


class _Anchor:
    """What the after-fork callbacks are keyed by (the libraries hold them by a weak reference to it)."""


_START_ANCHOR = _Anchor()
_start_hooks: set[str] = set()  # the libraries told to call _on_worker_start when a process of theirs starts


def _on_worker_start(_anchor: _Anchor) -> None:
    if _live:  # the finalizers were just cleared: this process's Monitors get their exit hook again
        _pool_hooks.clear()
        _hook_pool_exit()


def _after_fork_in_child() -> None:
    global _sigterm_ours
    parent = os.getppid()
    if _sigterm_ours:  # the parent's handler is not this child's: a pool's terminate() must not wait for it
        import signal

        try:
            if signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
        _sigterm_ours = False
    _pool_hooks.clear()
    for monitor in list(_built):
        try:
            monitor.after_fork_in_child(parent)
        except Exception as error:  # a Monitor that cannot start anew here scores nothing here: said
            log.warning("groundtrace: a Monitor could not start anew in forked process %d: %s", os.getpid(), error)

