"""A server that ends its process on SIGTERM before atexit runs: the Monitors settle in its own shutdown instead.

uvicorn (0.29 and later, its workers and a single server alike) handles SIGTERM itself; after its graceful shutdown
it puts back the handler it found (the default one, when the application was imported under it, as a worker
imports it) and raises the signal again, so the process ends right there: no atexit, and what the Monitors held
(records still being scored, the last requests') would be lost without a word. When the handler in place is a
uvicorn Server's, the Monitors settle at the end of that server's shutdown, once its last request has answered,
within their exit bound, before the signal is raised again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from groundtrace.redaction import get_logger

log = get_logger("groundtrace.monitor")
_HOOKED = "_groundtrace_settles_at_shutdown"


def settle_in_server_shutdown(handler: Any, settle: Callable[[], None]) -> bool:
    """``settle`` at the end of the shutdown of the uvicorn Server whose method ``handler`` (the SIGTERM handler in
    place) is; False when it is none (nothing done)."""
    server: Any = getattr(handler, "__self__", None)
    if type(server).__module__ != "uvicorn.server" or not callable(getattr(server, "shutdown", None)):
        return False
    if getattr(server, _HOOKED, False):
        return True
    shutdown = server.shutdown

    async def shutdown_then_settle(*args: Any, **kwargs: Any) -> None:
        try:
            await shutdown(*args, **kwargs)
        finally:
            # on the server's own thread, its connections closed: nothing else waits for this loop now
            try:
                settle()
            except Exception as error:
                log.warning("groundtrace: the Monitors could not settle at the server's shutdown: %s", error)

    server.shutdown = shutdown_then_settle
    setattr(server, _HOOKED, True)
    return True
