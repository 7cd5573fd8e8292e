"""LangGraph's own server, served for real: ``langgraph dev`` (the in-memory LangGraph API server of
``langgraph-cli[inmem]``) serves langgraph_server_app.py's two graphs, declared in langgraph.json, with
``groundtrace_langchain.instrument()`` at import; the client is LangGraph's own SDK (``langgraph_sdk``), every
request with a token of its own, some answered with a planted error.

Through the server's HTTP API: runs/wait on a thread and stateless, a second turn on the same thread streamed
(stream_mode values, messages, updates), a background run joined, two turns of a chat thread (messages in, an AI
message out; the second streamed with messages-tuple), and six runs at once on their own threads. Each run makes
one record: its own question (a chat turn's latest human message), the passages its retriever returned (not the
earlier turn's the thread's state still holds), the model's final answer, the server's run id and thread; the
planted answers are flagged and the faithful ones not. The server runs as ``langgraph dev`` runs it (uvicorn's
reloader, the app in a spawned worker process) and with ``--no-reload`` (one process); SIGTERM to its process
group settles every record before it exits. Nothing reaches beyond this machine: an audit hook in every process
of the server refuses, and notes, any connection or name lookup that is not the loopback's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph_sdk")

from langgraph_sdk import get_sync_client  # noqa: E402

from replay_rag import TOKEN, assert_the_records, expected_answer, passages, question, tokens_for  # noqa: E402
from test_lc_servers import free_port, records  # noqa: E402

HERE = Path(__file__).resolve().parent
# `make langgraph-site`: langgraph-cli[inmem] in a folder of its own, before .venv's packages on the server's path only
# (it holds protobuf below 7, which .venv's sentencepiece needs): see the Makefile
LANGGRAPH_SITE = HERE.parents[2] / ".cache" / "langgraph-site"

# In every process of the server (sitecustomize runs in uvicorn's spawned worker and in the scoring process too):
# a connection or a name lookup beyond the loopback is refused and written down.
OFFLINE = '''
import os, socket, sys

_LOCAL = {None, "", "127.0.0.1", "::1", "localhost", b"127.0.0.1", b"localhost"}
_NOTES = os.environ["GT_OFFLINE_NOTES"]


def _refuse(what):
    with open(_NOTES, "a", encoding="utf-8") as notes:
        notes.write(f"{os.getpid()} {what}\\n")
    raise OSError(f"offline test: {what} refused")


def _hook(event, args):
    if event == "socket.connect":
        sock, address = args
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL:
            _refuse(f"connect {address!r}")
    elif event == "socket.getaddrinfo" and args[0] not in _LOCAL:
        _refuse(f"getaddrinfo {args[0]!r}")


sys.addaudithook(_hook)
'''


def serve(tmp_path: Path, reload: bool) -> tuple[subprocess.Popen, int]:
    """``langgraph dev`` in a project directory of its own (langgraph.json and the graphs' file, as shipped):
    its in-memory state and the reloader's watch stay there."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("langgraph.json", "langgraph_server_app.py"):
        shutil.copy(HERE / name, project / name)
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / "sitecustomize.py").write_text(OFFLINE, encoding="utf-8")
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GROUNDTRACE_", "LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_"))}
    env.update(GROUNDTRACE_METRICS="lexical", GROUNDTRACE_SINKS="jsonl", GT_ATTACH="instrument",
               GROUNDTRACE_JSONL_PATH=str(tmp_path / "scores.jsonl"), GROUNDTRACE_EXIT_FLUSH_S="30",
               # no tracing to LangSmith, no usage report, no look for a newer langgraph-api on PyPI
               LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false", LANGGRAPH_CLI_NO_ANALYTICS="1",
               LANGGRAPH_NO_VERSION_CHECK="true", DO_NOT_TRACK="true",
               GT_OFFLINE_NOTES=str(tmp_path / "offline.txt"),
               PYTHONPATH=os.pathsep.join([str(offline), str(LANGGRAPH_SITE), str(HERE), env.get("PYTHONPATH", "")]),
               PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--host", "127.0.0.1", "--port", str(port),
               "--config", "langgraph.json", "--n-jobs-per-worker", "4", *([] if reload else ["--no-reload"])]
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server's, closed when it ends
    server = subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server exited {server.returncode}:\n{(tmp_path / 'server.log').read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=5):
                return server, port
        except OSError:
            time.sleep(0.3)
    os.killpg(server.pid, signal.SIGKILL)
    raise AssertionError(f"the server did not answer within 120 s:\n{(tmp_path / 'server.log').read_text()}")


def stop(server: subprocess.Popen, tmp_path: Path, how: str) -> str:
    """Stop the server as ``how`` says: ``ctrl-c`` (SIGINT to its process group, as a terminal's Ctrl-C sends it),
    ``sigterm`` (SIGTERM to the ``langgraph`` process, as a process manager sends it) or ``group-sigterm`` (SIGTERM
    to every process of the group, as systemd's default stop sends it: the scoring process leaves the ending to the
    application and scores what it holds). Every process of the group
    (the reloader, its worker, groundtrace's scoring process) ends within 60 s (the Monitor's exit flush is 30 s);
    returns what they said."""
    if how == "ctrl-c":
        os.killpg(server.pid, signal.SIGINT)
    elif how == "group-sigterm":
        os.killpg(server.pid, signal.SIGTERM)
    else:
        server.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            server.wait(timeout=5)
            return (tmp_path / "server.log").read_text()
        server.poll()  # reap the leader, so that only live members keep the group
        time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)
    raise AssertionError(f"{how}: still running after 60 s:\n{(tmp_path / 'server.log').read_text()}")


def rag_input(token: str) -> dict[str, Any]:
    return {"question": question(token)}


def chat_input(token: str) -> dict[str, Any]:
    return {"messages": [{"role": "human", "content": question(token)}]}


def streamed_answer(parts: list[Any]) -> str:
    """The model's message as the ``messages`` stream mode last sent it (each part the message so far)."""
    [*_, last] = [part.data for part in parts if part.event == "messages/partial"]
    return last[0]["content"]


def tuple_streamed_answer(parts: list[Any]) -> str:
    """The model's message, its chunks of the ``messages-tuple`` stream mode joined."""
    return "".join(part.data[0]["content"] for part in parts
                   if part.event == "messages" and part.data[1].get("langgraph_node") == "generate")


def call_the_server(port: int, tokens: dict[str, list[str]]) -> dict[str, str]:
    """Every request of ``tokens``, each kind through its own route; returns the thread of each threaded token."""
    url = f"http://127.0.0.1:{port}"
    client = get_sync_client(url=url, api_key=None)
    thread_of: dict[str, str] = {}

    # a thread's first turn with runs/wait, its second streamed (values, messages, updates): the state the
    # second turn starts from still holds the first turn's documents
    thread = client.threads.create()["thread_id"]
    [first] = tokens["wait"]
    state = client.runs.wait(thread, "rag", input=rag_input(first))
    assert state["answer"] == expected_answer(first), state
    [second] = tokens["stream"]
    parts = list(client.runs.stream(thread, "rag", input=rag_input(second),
                                    stream_mode=["values", "messages", "updates"]))
    values = [part.data for part in parts if part.event == "values"]
    assert values[0]["documents"][0]["page_content"] == passages(first)[0], values[0]  # the earlier turn's
    assert values[-1]["answer"] == expected_answer(second), values[-1]
    assert streamed_answer(parts) == expected_answer(second)
    assert any(part.event == "updates" and "generate" in part.data for part in parts), [p.event for p in parts]
    thread_of.update({first: thread, second: thread})

    # stateless: /runs/wait with no thread
    [token] = tokens["stateless"]
    state = client.runs.wait(None, "rag", input=rag_input(token))
    assert state["answer"] == expected_answer(token), state

    # a background run, joined
    thread = client.threads.create()["thread_id"]
    [token] = tokens["background"]
    run = client.runs.create(thread, "rag", input=rag_input(token))
    state = client.runs.join(thread, run["run_id"])
    assert state["answer"] == expected_answer(token), state
    thread_of[token] = thread

    # a chat thread: messages in, an AI message out; the second turn streamed with messages-tuple
    thread = client.threads.create()["thread_id"]
    first, second = tokens["chat"]
    state = client.runs.wait(thread, "chat", input=chat_input(first))
    assert state["messages"][-1]["content"] == expected_answer(first), state
    parts = list(client.runs.stream(thread, "chat", input=chat_input(second),
                                    stream_mode=["values", "messages-tuple"]))
    [*_, last] = [part.data for part in parts if part.event == "values"]
    assert [m["type"] for m in last["messages"]] == ["human", "ai", "human", "ai"], last
    assert last["messages"][-1]["content"] == expected_answer(second), last
    assert tuple_streamed_answer(parts) == expected_answer(second)
    thread_of.update({first: thread, second: thread})

    # six runs at once, each on a thread of its own, four at a time in the server (--n-jobs-per-worker 4)
    def one(token: str) -> tuple[str, str]:
        client = get_sync_client(url=url, api_key=None)
        thread = client.threads.create()["thread_id"]
        state = client.runs.wait(thread, "rag", input=rag_input(token))
        assert state["answer"] == expected_answer(token), state
        return token, thread

    with ThreadPoolExecutor(6) as pool:
        thread_of.update(pool.map(one, tokens["concurrent"]))

    # the server's run id of each threaded run, by the token of its input
    run_of = {}
    for thread in set(thread_of.values()):
        for run in client.runs.list(thread):
            [token] = {f"tok-{t}" for t in TOKEN.findall(json.dumps(run["kwargs"]["input"]))}
            run_of[token] = run["run_id"]
    assert sorted(run_of) == sorted(thread_of)
    return {token: f"{thread_of[token]} {run_of[token]}" for token in thread_of}


REQUESTS = {"wait": 1, "stream": 1, "stateless": 1, "background": 1, "chat": 2, "concurrent": 6}


@pytest.mark.skipif(not (LANGGRAPH_SITE / "langgraph_api").is_dir(), reason="run make langgraph-site first")
@pytest.mark.parametrize(("reload", "how"), [(True, "ctrl-c"), (True, "sigterm"), (False, "sigterm"),
                                             (False, "group-sigterm")],
                         ids=["reloader-ctrl-c", "reloader-sigterm", "no-reload-sigterm", "no-reload-group-sigterm"])
def test_langgraph_dev_records_each_run_right(tmp_path, reload, how):
    tokens = tokens_for(REQUESTS)
    server, port = serve(tmp_path, reload)
    try:
        runs = call_the_server(port, tokens)
    finally:
        log = stop(server, tmp_path, how)
    for said in ("could not be read", "Traceback", "BlockingError", "not scored when the Monitor closed"):
        assert said not in log, log[-6000:]
    assert "groundtrace: capturing LangChain" in log, log[-6000:]
    offline = tmp_path / "offline.txt"
    assert not offline.exists(), f"the server reached beyond this machine:\n{offline.read_text()}"

    def the_servers_ids(kind: str, token: str, record: dict) -> None:  # the server's run id, the thread as session
        if token in runs:
            assert f"{record['session_id']} {record['run_id']}" == runs[token], (kind, record)

    assert_the_records(records(tmp_path), tokens, the_servers_ids)
