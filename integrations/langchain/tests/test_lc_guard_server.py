"""Guard mode in the server staging runs: uvicorn with two workers serves guard_server_app.py's guarded chain to
concurrent requests (awaited, on the thread pool, streamed), half of them answered with a planted price, with one
core of the machine kept busy. Every planted answer reaches its caller redacted (a stream never carries the
unsupported sentence), every faithful one untouched, and staging's store holds one record per request, scored once
by the guard, with what it did."""

from __future__ import annotations

import sys
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

from test_lc_servers import UVICORN, busy_core, environment, free_port, lost_said, records, serve, stop  # noqa: F401

# guard_server_app's answers (not imported: importing it instruments LangChain in this process, as a server does)
FAITHFUL = "The Larkfield museum opened in 1978. It closes at 6 pm."
PLANTED = "The Larkfield museum opened in 1978. Entry costs 15 euros. It closes at 6 pm."
WRONG = "Entry costs 15 euros."
KINDS = ("ask", "ask_sync", "stream")


def test_uvicorn_workers_guard_every_answer_and_staging_records_each_once(tmp_path):
    port = free_port()
    env = environment(tmp_path) | {"GROUNDTRACE_METRICS": "grounding"}
    sent = [(KINDS[i % 3], "planted" if i % 2 else "faithful", f"tok-{uuid.uuid4().hex[:8]}") for i in range(36)]

    def one(item: tuple[str, str, str]) -> bytes:
        kind, answer, token = item
        query = urllib.parse.urlencode({"q": f"Tell me about the Larkfield museum ({token}, {answer})."})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{kind}?{query}", timeout=120) as reply:
            return reply.read()

    server = serve([sys.executable, *UVICORN, "--port", str(port), "guard_server_app:app"], env, tmp_path, port)
    try:
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(one, sent))
    finally:
        log = stop(server, tmp_path)
    for (kind, answer, _), reply in zip(sent, replies, strict=True):
        pieces = [p.decode() for p in reply.split(b"\x00") if p] if kind == "stream" else [reply.decode()]
        assert not any(WRONG in piece for piece in pieces), (kind, pieces)
        assert "".join(pieces).strip() == FAITHFUL, (kind, answer, pieces)  # redacted, or faithful untouched
    rows = {row["record"]["question"]: row for row in records(tmp_path)}
    assert len(rows) == len(sent) == len(records(tmp_path)), log[-3000:]  # one record per request: scored once
    for _, answer, token in sent:
        row = rows[f"Tell me about the Larkfield museum ({token}, {answer})."]
        assert row["record"]["answer"].strip() == (PLANTED if answer == "planted" else FAITHFUL)
        assert row["record"]["metadata"]["guard"]["action"] == ("redacted" if answer == "planted" else "passed")
        assert row["scores"][0]["metric"] == "grounding" and row["scores"][0]["hallucinated"] is (answer == "planted")
    lost_said(log)
