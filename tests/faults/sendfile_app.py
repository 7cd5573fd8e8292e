"""A Flask app whose ``/file`` is ``send_file`` of the file named by ``SENDFILE_PATH``, wrapped in groundtrace's
WSGIMiddleware, and gunicorn hooks (``-c python:tests.faults.sendfile_app``) that write one JSON line per request
to ``SENDFILE_LOG``: whether gunicorn sent the body with ``sendfile``, whether the file was closed and what the
request left waiting once the server closed the response."""

from __future__ import annotations

import json
import os
from typing import Any

from flask import Flask, send_file

import groundtrace
from groundtrace.capture import marked

app = Flask(__name__)
opened: list[Any] = []


@groundtrace.retrieval
def search(query: str) -> list[str]:
    return [f"The manual for {query} is the file served."]


@app.get("/file")
def download() -> Any:
    search("the pump")  # retrieved, then no model call: the request's end drops it
    opened.append(open(os.environ["SENDFILE_PATH"], "rb"))  # noqa: SIM115 - the server closes it
    return send_file(opened[-1], mimetype="application/octet-stream")


app.wsgi_app = groundtrace.WSGIMiddleware(app.wsgi_app)  # type: ignore[method-assign]
application = app

workers = 1
worker_class = "sync"


def post_worker_init(worker: Any) -> None:  # in the worker: record what each response's sendfile() answered
    from gunicorn.http.wsgi import Response

    plain = Response.sendfile

    def sendfile(self: Any, respiter: Any) -> bool:
        self.sent_with_sendfile = plain(self, respiter)
        return self.sent_with_sendfile

    Response.sendfile = sendfile


def post_request(worker: Any, req: Any, environ: dict[str, Any], resp: Any) -> None:  # after the body's close()
    line = {"path": req.path, "sendfile": getattr(resp, "sent_with_sendfile", False),
            "file_closed": bool(opened) and opened[-1].closed, "left": len(marked.PENDING.get())}
    with open(os.environ["SENDFILE_LOG"], "a") as out:
        out.write(json.dumps(line) + "\n")
