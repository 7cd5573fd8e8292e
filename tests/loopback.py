"""One loopback HTTP server for every test that talks to a scripted API on 127.0.0.1.

It records each request and answers with ``respond(request)``: a :class:`Reply`, or a tuple
(status, JSON body[, delay in seconds]); a Reply with ``body`` sends those bytes as they are (an
event stream, say), chunked. It also counts the requests in flight at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    number: int = -1  # its place among the server's requests, 0 first

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None  # sent as is, chunked, instead of the JSON payload
    content_type: str = "application/json"

    @classmethod
    def of(cls, value: Reply | tuple) -> Reply:
        if isinstance(value, Reply):
            return value
        status, payload, *delay = value
        return cls(status, payload, delay_s=delay[0] if delay else 0.0)


class LoopbackServer:
    def __init__(self, respond: Callable[[Request], Reply | tuple]) -> None:
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._stopping = threading.Event()
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                url = urlsplit(self.path)
                request = Request(self.command, url.path, parse_qs(url.query),
                                  {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                with lock:
                    request.number = len(server.requests)
                    server.requests.append(request)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = Reply.of(respond(request))
                    if reply.delay_s and server._stopping.wait(reply.delay_s):
                        return  # the test is over: drop the connection
                    data = json.dumps(reply.payload).encode() if reply.body is None else reply.body
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    if reply.body is None:
                        self.send_header("Content-Length", str(len(data)))
                    else:
                        self.send_header("Transfer-Encoding", "chunked")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data if reply.body is None else b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
                except OSError:
                    pass  # the client gave up (a timeout test)
                finally:
                    with lock:
                        server.in_flight -= 1

            do_GET = do_POST = do_PATCH = do_PUT = _handle  # noqa: N815 - the stdlib's names

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
