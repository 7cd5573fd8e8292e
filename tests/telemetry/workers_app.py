"""A small application served by real multi-worker servers in test_scrape_workers.py: each request to ``/ask``
submits one record to the Monitor built when the module is imported (under ``gunicorn --preload``: in the
master, before the workers are forked). The Monitor is built explicitly, with its metric and sinks as
arguments; where its metrics go (GROUNDTRACE_TELEMETRY) and where it scores (GROUNDTRACE_ISOLATION) come from
the environment, as for every setting a Monitor is not given.

GET /ask?kind=grounded|planted   one record (planted: an answer its passage does not support); answers the pid
GET /serving                     {"pid": ..., "serving": whether this process listens on the metrics port}
``wsgi_app`` for gunicorn, ``asgi_app`` for uvicorn.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import parse_qs

from groundtrace.monitor import Monitor
from groundtrace.record import Record

CONTEXT = "Paris is the capital of France."
ANSWERS = {"grounded": "Paris is the capital of France.",
           "planted": "Paris is the capital of Germany; Napoleon founded it in 1850."}
MONITOR = Monitor(["lexical"], "none")


def handle(path: str, query: str) -> tuple[str, bytes]:
    time.sleep(0.02)  # each request holds its worker a while (blocking, under uvicorn too): the next goes elsewhere
    if path == "/ask":
        kind = parse_qs(query)["kind"][0]
        MONITOR.submit(Record(question="What is the capital of France?", contexts=[CONTEXT], answer=ANSWERS[kind]))
        return "200 OK", str(os.getpid()).encode()
    if path == "/serving":
        endpoint = MONITOR.telemetry.endpoint if MONITOR.telemetry is not None else None
        serving = endpoint is not None and endpoint.server is not None
        return "200 OK", json.dumps({"pid": os.getpid(), "serving": serving}).encode()
    return "404 Not Found", b""


def wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    status, body = handle(environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    status, body = handle(scope["path"], scope.get("query_string", b"").decode())
    await send({"type": "http.response.start", "status": int(status.split()[0]),
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
