"""`groundtrace review --host 0.0.0.0`: the page holds the API token, so beyond loopback it is served only to a
browser that has the token already (the URL printed at start, then its cookie), never to a client that merely
says `Host: 127.0.0.1`; a colleague on the machine's own name gets in with the URL; one WARNING says the answers
are exposed. Binding 0.0.0.0 here is only ever reached through 127.0.0.1."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from groundtrace.io.labels import read_decisions  # noqa: E402
from groundtrace.review.app import Review, create_app  # noqa: E402
from tests.review.samples import many, write  # noqa: E402
from tests.review.server import free_port  # noqa: E402

PORT = 8765


def page_token(html: str) -> str:
    return json.loads(re.search(r"const TOKEN = (\"[^\"]+\");", html).group(1))


def test_beyond_loopback_the_page_and_its_token_need_the_token_url(tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    app = create_app(Review(many(3), labels), host="0.0.0.0", port=PORT)
    client = TestClient(app, base_url=f"http://127.0.0.1:{PORT}")

    # any client can say it is local: it gets neither the page nor the token, only where to go
    for path in ("/", "/views"):
        refused = client.get(path, headers={"Host": "127.0.0.1"})
        assert refused.status_code == 401 and "TOKEN" not in refused.text
        assert "open the URL printed by `groundtrace review`" in refused.text
        assert "set-cookie" not in refused.headers
    token = app.state.token
    assert token not in refused.text
    assert client.get("/", params={"token": "guess"}).status_code == 403
    assert client.get("/api/queue").status_code == 403  # the API still wants the header
    assert client.post("/api/label", json={"id": "r000", "label": "skip"}).status_code == 403

    opened = client.get("/", params={"token": token})
    assert opened.status_code == 200 and page_token(opened.text) == token
    cookie = opened.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")

    # later requests carry the cookie (the page's links, a reload): no token in the URL needed
    again = client.get("/")
    assert again.status_code == 200 and page_token(again.text) == token
    assert client.get("/views").status_code == 200
    saved = client.post("/api/label", json={"id": "r000", "label": "skip"}, headers={"X-Groundtrace-Token": token})
    assert saved.status_code == 200 and list(read_decisions(labels)) == ["r000"]

    # a colleague opens the printed URL by this machine's name: the Host is accepted, the token lets them in
    colleague = TestClient(app, base_url=f"http://{socket.gethostname()}:{PORT}")
    assert colleague.get("/").status_code == 401
    assert colleague.get("/", params={"token": token}).status_code == 200
    # a page on another name that resolves here (DNS rebinding) is still turned away by its Host
    assert client.get("/", headers={"Host": "evil.example"}, params={"token": token}).status_code == 400


def test_one_warning_says_the_answers_are_reachable_from_the_network(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        create_app(Review(many(3), tmp_path / "labels.jsonl"), host="127.0.0.1", port=PORT)
        assert not caplog.records  # loopback: as before, no warning and no token URL
        app = create_app(Review(many(3), tmp_path / "labels.jsonl"), host="0.0.0.0", port=PORT)
        TestClient(app, base_url=f"http://127.0.0.1:{PORT}").get("/", params={"token": app.state.token})
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert "0.0.0.0:8765" in warning.getMessage() and "reachable from the network" in warning.getMessage()
    assert app.state.token not in warning.getMessage()


def test_the_command_warns_and_prints_the_url_with_its_token(tmp_path) -> None:
    scores = write(many(3), tmp_path / "scores.jsonl")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "groundtrace.cli", "review", str(scores), "--host", "0.0.0.0",
                                "--port", str(port), "--no-open"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}, text=True)
    try:
        said = ""
        deadline = time.monotonic() + 60
        while "reviewing" not in said and time.monotonic() < deadline and process.poll() is None:
            said += process.stdout.readline()
        url = re.search(r"at (http://\S+/\?token=\S+?);", said)
        assert url, said
        assert said.count("reachable from the network") == 1 and "0.0.0.0" in said
        token = url.group(1).split("?token=")[1]
        local = f"http://127.0.0.1:{port}/"  # only ever reached through loopback
        for _ in range(300):
            try:
                urllib.request.urlopen(local, timeout=1)
                raise AssertionError("the page was served without its token")
            except urllib.error.HTTPError as error:
                assert error.code == 401 and token not in error.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        with urllib.request.urlopen(f"{local}?token={token}", timeout=10) as opened:
            assert page_token(opened.read().decode()) == token
            assert "HttpOnly" in opened.headers["Set-Cookie"]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        process.stdout.close()
