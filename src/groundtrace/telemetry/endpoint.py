"""The scrape endpoint, kept off the application's hot path.

The endpoint runs in the application's process (it serves prometheus_client's registry, where the Monitor's
metrics are). Making the exposition (collecting every metric, formatting it) holds the GIL; one per scrape,
200 scrapes at once would take turns with the application's own threads. So the exposition is made at most
once per :data:`CACHE_S` per kind of answer (text or OpenMetrics, plain or gzip) and served from that
cache, and at most :data:`CONCURRENT` scrapes are answered at once: the others get ``503 Service
Unavailable`` with ``Retry-After: 1`` at once, which Prometheus counts as a failed scrape and retries. The
answers themselves are prometheus_client's own (its WSGI app: content negotiation, gzip, ``/metrics``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

#: an exposition is served for this long before it is made again (Prometheus scrapes every 15 s or so)
CACHE_S = 0.5
#: scrapes answered at once; more get 503 at once
CONCURRENT = 4


class CachedExposition:
    """A WSGI app in front of prometheus_client's: the answers cached for ``cache_s``, ``concurrent`` at once."""

    def __init__(self, app: Callable[..., Iterable[bytes]], cache_s: float = CACHE_S, concurrent: int = CONCURRENT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app, self.cache_s, self._clock = app, cache_s, clock
        self._slots = threading.BoundedSemaphore(concurrent)
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, ...], tuple[float, str, list[tuple[str, str]], bytes]] = {}
        self.made = 0  # expositions made (for the tests)
        self.refused = 0  # scrapes answered 503

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            start_response("503 Service Unavailable", [("Content-Type", "text/plain"), ("Retry-After", "1")])
            return [b"busy: too many scrapes at once\n"]
        try:
            key = tuple(str(environ.get(name, "")) for name in
                        ("PATH_INFO", "QUERY_STRING", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING"))
            with self._lock:  # one exposition is made at a time; the scrapes waiting for it then share it
                cached = self._cache.get(key)
                if cached is None or self._clock() - cached[0] >= self.cache_s:
                    cached = self._cache[key] = (self._clock(), *self._make(environ))
                    self.made += 1
            _, status, headers, body = cached
            start_response(status, headers)
            return [body]
        finally:
            self._slots.release()

    def _make(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        said: dict[str, Any] = {}

        def keep(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            said["status"], said["headers"] = status, headers

        body = b"".join(self.app(environ, keep))
        return said["status"], list(said["headers"]), body


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # socketserver's backlog of 5 drops a burst's connections, which then wait for SYN retries (1 s, 3 s, 7 s):
    # the busy answer (503) is meant to be immediate
    request_queue_size = 128


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


def serve(host: str, port: int, registry: Any = None) -> tuple[Any, threading.Thread, CachedExposition]:
    """The endpoint on ``host:port`` (port 0: a free one), serving ``registry`` (default: prometheus_client's)
    through the cache; started on a daemon thread. Raises OSError when it cannot listen there."""
    from prometheus_client import REGISTRY, make_wsgi_app

    app = CachedExposition(make_wsgi_app(registry or REGISTRY), cache_s=CACHE_S, concurrent=CONCURRENT)
    server_class = _Server6 if ":" in host else _Server
    server = make_server(host, port, app, server_class=server_class, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="groundtrace-metrics-endpoint", daemon=True)
    thread.start()
    return server, thread, app
