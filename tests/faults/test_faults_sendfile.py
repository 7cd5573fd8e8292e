"""Issue 54, row 15: Flask's ``send_file`` through groundtrace's WSGIMiddleware under gunicorn keeps the server's
file wrapper (``wsgi.file_wrapper``), so gunicorn still sends the file with ``sendfile``; the request's scope
still ends when the server closes the response. A real gunicorn (sync worker) on a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import groundtrace
from groundtrace.capture import marked
from tests.phoenix_server import free_port

pytest.importorskip("gunicorn")
pytest.importorskip("flask")

ROOT = Path(__file__).resolve().parents[2]


class FileWrapper:  # as a server's own (gunicorn's, wsgiref's): its close is the file's
    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike, self.blksize = filelike, blksize
        self.close = filelike.close

    def __iter__(self) -> Any:
        return iter(lambda: self.filelike.read(self.blksize), b"")


def test_the_middleware_returns_the_servers_file_wrapper_itself_and_its_close_ends_the_scope(tmp_path):
    path = tmp_path / "manual.bin"
    path.write_bytes(b"pump manual " * 1000)
    returned: list[Any] = []

    @groundtrace.retrieval
    def search(query: str) -> list[str]:
        return [f"The manual for {query}."]

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        search("the pump")
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        returned.append(environ["wsgi.file_wrapper"](open(path, "rb")))  # noqa: SIM115 - closed by close()
        return returned[-1]

    body = groundtrace.WSGIMiddleware(app)({"wsgi.file_wrapper": FileWrapper}, lambda *a: None)
    assert body is returned[0]  # not a wrapper around it: a server's isinstance() check still holds
    assert b"".join(body) == path.read_bytes()
    assert [r.query for r in marked.PENDING.get()] == ["the pump"]  # the request's until the server closes it
    body.close()
    assert body.filelike.closed and marked.PENDING.get() == ()


def test_flask_send_file_under_gunicorn_is_sent_with_sendfile_whole_and_ends_its_scope(tmp_path):
    data = os.urandom(8 << 20)
    (tmp_path / "manual.bin").write_bytes(data)
    port, log = free_port(), tmp_path / "requests.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    env.update(SENDFILE_PATH=str(tmp_path / "manual.bin"), SENDFILE_LOG=str(log), PYTHONUNBUFFERED="1")
    with open(tmp_path / "server.log", "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:tests.faults.sendfile_app",
                                    "-b", f"127.0.0.1:{port}", "tests.faults.sendfile_app:application"], cwd=ROOT,
                                   env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/file", timeout=30) as reply:
                    got = reply.read()
                break
            except OSError:
                server_log = (tmp_path / "server.log").read_text(errors="replace")[-3000:]
                assert process.poll() is None and time.monotonic() < deadline, f"no server:\n{server_log}"
                time.sleep(0.2)
        assert got == data  # whole
        deadline = time.monotonic() + 10
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        [line] = [json.loads(line) for line in log.read_text().splitlines()]
        assert line == {"path": "/file", "sendfile": True, "file_closed": True, "left": 0}
        assert "Error handling request" not in (tmp_path / "server.log").read_text(errors="replace")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
