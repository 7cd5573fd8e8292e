from __future__ import annotations

import os

# rich wraps tables to the terminal; tests read whole cells
os.environ.setdefault("COLUMNS", "200")

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from groundtrace.backends.embedders import Embedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_data(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is missing: the tests need the labelled data of ../shared/data")
    return path


class TableEmbedder(Embedder):
    """A backend whose vectors are given by the test, so cosines can be computed by hand."""

    name = "table"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        super().__init__()
        self.vectors = vectors

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


class CaptureServer:
    """A loopback HTTP server that records requests and answers with a scripted function."""

    def __init__(self, respond) -> None:
        self.requests: list[dict] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                capture.requests.append({"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
                status, payload = respond(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def capture_server() -> Iterator[type[CaptureServer]]:
    yield CaptureServer
