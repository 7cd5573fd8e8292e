"""LangServe, served for real: uvicorn serves langserve_app.py's LCEL chain with ``add_routes``, attached three ways
(``instrument()``, ``chain.with_config(callbacks=[...])``, ``groundtrace-run``), and every endpoint is called
with a token per request: invoke, batch, stream, stream_log and stream_events through LangServe's own
``RemoteRunnable`` client, and the app's own routes (an int run id; ``astream_events`` v1 and v2 with no run id).

LangServe gives each run a string run id: each request still makes one record whose question is the request's,
whose contexts are its retrieved passages and whose answer is the model's final answer (not the retrieved text),
and the planted answers are flagged. The client's own runs (``RemoteRunnable`` with a handler) make no record:
they retrieved nothing and called no model; the server's handler records the turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("langserve")

from groundtrace.monitor import Monitor  # noqa: E402
from groundtrace_langchain import GroundtraceCallbackHandler  # noqa: E402
from langserve import RemoteRunnable  # noqa: E402

from lc_app import CollectingSink  # noqa: E402
from replay_rag import assert_the_records, expected_answer, question, tokens_for  # noqa: E402
from test_lc_servers import busy_core, free_port, records, stop  # noqa: E402, F401  (busy_core: autouse, one core burnt)

HERE = Path(__file__).resolve().parent


def serve(tmp_path: Path, attach: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    env.update(GROUNDTRACE_METRICS="lexical", GROUNDTRACE_SINKS="jsonl", GT_ATTACH=attach,
               GROUNDTRACE_JSONL_PATH=str(tmp_path / "scores.jsonl"), GROUNDTRACE_EXIT_FLUSH_S="30",
               PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]), PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
               "langserve_app:app"]
    if attach == "launcher":
        launcher = shutil.which("groundtrace-run", path=os.path.dirname(sys.executable))
        assert launcher is not None, "groundtrace-run is not installed beside this Python"
        command = [launcher, *command]
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server's, closed when it ends
    server = subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server exited {server.returncode}:\n{(tmp_path / 'server.log').read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5):
                return server, port
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError(f"the server did not answer within 90 s:\n{(tmp_path / 'server.log').read_text()}")


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as reply:
        return reply.read().decode()


async def call_every_endpoint(port: int, tokens: dict[str, list[str]], client_handler: GroundtraceCallbackHandler) -> None:
    """Each endpoint answers its own tokens' questions; the client's runs carry a groundtrace handler of their own."""
    remote = RemoteRunnable(f"http://127.0.0.1:{port}/rag/")
    config = {"callbacks": [client_handler]}
    expected = {token: expected_answer(token) for group in tokens.values() for token in group}

    [token] = tokens["invoke"]
    assert remote.invoke(question(token), config=config) == expected[token]
    assert remote.batch([question(t) for t in tokens["batch"]], config=config) == [expected[t] for t in tokens["batch"]]
    [token] = tokens["stream"]
    assert "".join(remote.stream(question(token), config=config)) == expected[token]
    [token] = tokens["stream_log"]
    patches = [patch async for patch in remote.astream_log(question(token), config=config)]
    assert patches, "stream_log sent nothing"
    [token] = tokens["stream_events"]
    events = [event async for event in remote.astream_events(question(token), version="v2", config=config)]
    assert any(event["event"] == "on_chain_end" for event in events), [event["event"] for event in events][:20]
    [token] = tokens["int"]
    assert get(port, f"/int?q={urllib.parse.quote(question(token))}&run={int(token[4:], 16) + 1}") == expected[token]
    for version in ("v1", "v2"):
        [token] = tokens[f"events_{version}"]
        lines = get(port, f"/events?version={version}&q={urllib.parse.quote(question(token))}").splitlines()
        assert "".join(json.loads(line)["chunk"] for line in lines) == expected[token]


ENDPOINTS = {"invoke": 1, "batch": 3, "stream": 1, "stream_log": 1, "stream_events": 1, "int": 1, "events_v1": 1,
             "events_v2": 1}


@pytest.mark.parametrize("attach", ["instrument", "config", "launcher"])
def test_every_langserve_endpoint_records_each_request_right(tmp_path, attach):
    sink = CollectingSink()
    client_monitor = Monitor(["lexical"], [sink], isolation="thread", telemetry="none")
    client_handler = GroundtraceCallbackHandler(monitor=client_monitor)
    before = client_handler.stats()
    tokens = tokens_for(ENDPOINTS)
    server, port = serve(tmp_path, attach)
    try:
        asyncio.run(call_every_endpoint(port, tokens, client_handler))
    finally:
        log = stop(server, tmp_path)
    assert "could not be read" not in log and "Traceback" not in log, log[-4000:]
    assert_the_records(records(tmp_path), tokens)
    # the client: its runs retrieved nothing and called no model; no record there, said as a reason
    assert client_monitor.flush(30)
    client_monitor.close()
    assert sink.records == []
    after = client_handler.stats()
    assert after.recorded == before.recorded and after.callback_errors == before.callback_errors
    # invoke, the batch (one run per input), stream, stream_log, stream_events
    assert sum(after.no_record.values()) - sum(before.no_record.values()) == 1 + 3 + 1 + 1 + 1
