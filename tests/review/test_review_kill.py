"""The review server killed (SIGKILL) while four clients label: no decision the page was told is saved is
lost, and the labels file still reads."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.error
import urllib.request

import pytest

pytest.importorskip("starlette")

from groundtrace.io.labels import iter_decisions, read_labels  # noqa: E402
from tests.review.samples import many, write  # noqa: E402
from tests.review.server import review_server  # noqa: E402


def test_no_confirmed_decision_is_lost_when_the_server_is_killed(tmp_path) -> None:
    rows = many(100)
    scores, labels = write(rows, tmp_path / "scores.jsonl"), tmp_path / "labels.jsonl"
    confirmed: list[tuple[str, str]] = []
    lock = threading.Lock()
    halfway = threading.Event()

    with review_server(scores, labels) as server:
        token = server.token()

        def label(ids: list[str]) -> None:
            for key in ids:
                choice = "unsupported" if int(key[1:]) % 3 else "supported"
                request = urllib.request.Request(server.url + "/api/label", method="POST",
                                                 data=json.dumps({"id": key, "label": choice, "note": "n" * 500}).encode(),
                                                 headers={"X-Groundtrace-Token": token, "Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        saved = json.loads(answer.read())["saved"]
                except (urllib.error.URLError, ConnectionError, OSError):
                    return  # the server is gone: what was not confirmed may or may not be on disk
                with lock:
                    confirmed.append((saved["id"], saved["label"]))
                    if len(confirmed) >= 50:
                        halfway.set()

        keys = [r.id for r in rows]
        clients = [threading.Thread(target=label, args=(keys[i::4],)) for i in range(4)]
        for client in clients:
            client.start()
        assert halfway.wait(60)
        os.kill(server.process.pid, signal.SIGKILL)  # mid-session: the other clients are still sending
        for client in clients:
            client.join(30)

    on_disk = [(d.id, d.label) for d in iter_decisions(labels)]  # reads: no torn line breaks it
    assert set(confirmed) <= set(on_disk), "a decision the page was told is saved is missing"
    assert 50 <= len(confirmed) < 100 and len(on_disk) >= len(confirmed)
    assert len(read_labels(labels)) == len(on_disk)


def test_a_busy_port_is_said_plainly_and_port_0_takes_a_free_one(tmp_path) -> None:
    import socket
    import subprocess
    import sys

    scores = write(many(3), tmp_path / "scores.jsonl")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "review", str(scores), "--no-open", "--port",
                               str(port)], capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2
    said = " ".join((done.stdout + done.stderr).split())
    assert f"cannot serve on 127.0.0.1:{port}" in said and "try --port 0" in said and "Traceback" not in done.stderr

    with subprocess.Popen([sys.executable, "-m", "groundtrace.cli", "review", str(scores), "--no-open", "--port", "0"],
                          stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}) as app:
        try:
            line = app.stderr.readline()  # messages go to stderr, as every command's do
            url = line.split(" at ", 1)[1].split(";", 1)[0]
            assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
            with urllib.request.urlopen(url, timeout=10) as page:
                assert b"groundtrace review" in page.read()
        finally:
            app.terminate()
