"""In the servers staging runs, every request gets its own record: real uvicorn, gunicorn (gthread, and sync with
--preload), a Celery prefork worker and multiprocessing pools serve server_app.py's RAG endpoint to concurrent
requests that each carry a token of their own; some retrieve and refuse, some call the model without retrieving.
One record per RAG request, none holding another request's text, nothing lost or said twice; SIGTERM to the
master ends it within 20 s. The servers run with one core of the machine kept busy by a CPU-burning process, as on a
loaded CI runner, and also under groundtrace-run (no code change), where the supervisor starts no scoring process and
no worker is restarted."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
LAUNCHER = Path(sys.executable).with_name("groundtrace-run")
TOKEN = re.compile(r"tok-[0-9a-f]{8}")
RAG, REFUSE, CHAT = 192, 24, 24  # requests of each kind, interleaved


def requests() -> list[tuple[str, str]]:
    """(kind, token) in an order that interleaves the kinds: a refusal or a chat between RAG requests."""
    kinds = ["rag"] * RAG + ["refuse"] * REFUSE + ["chat"] * CHAT
    order = sorted(range(len(kinds)), key=lambda i: (i * 7919) % len(kinds))
    return [(kinds[i], f"tok-{uuid.uuid4().hex[:8]}") for i in order]


def question(token: str) -> str:
    return f"How long do refunds take for order {token}?"


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    env.update(GROUNDTRACE_METRICS="lexical", GROUNDTRACE_SINKS="jsonl",
               GROUNDTRACE_JSONL_PATH=str(tmp_path / "scores.jsonl"), GROUNDTRACE_EXIT_FLUSH_S="15",
               PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]), PYTHONUNBUFFERED="1", **extra)
    return env


def records(tmp_path: Path) -> list[dict]:
    path = tmp_path / "scores.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def assert_each_request_its_own(rows: list[dict], sent: list[tuple[str, str]]) -> None:
    """One record per RAG request; every record's question, passages and answer hold its own token only."""
    rag = {token for kind, token in sent if kind == "rag"}
    seen: dict[str, int] = {}
    for row in rows:
        record = row["record"]
        texts = [record["question"] or "", record["answer"] or "", *record["contexts"]]
        tokens = {t for text in texts for t in TOKEN.findall(text)}
        assert len(tokens) == 1, f"a record holds {sorted(tokens)}: {record}"
        [token] = tokens
        assert token in rag, f"a record for a request that made no RAG turn ({token}): {record}"
        assert record["contexts"] and all(token in c for c in record["contexts"]) and token in record["answer"], record
        seen[token] = seen.get(token, 0) + 1
        assert row["scores"][0]["metric"] == "lexical" and row["scores"][0]["error"] is None, row["scores"]
    assert seen == dict.fromkeys(rag, 1), (f"{len(rag - set(seen))} RAG requests without a record, "
                                           f"{sum(n > 1 for n in seen.values())} with more than one")


@pytest.fixture(autouse=True)
def busy_core():
    """Every test here runs with one core burnt at normal priority: the machine is loaded, as a shared CI runner is
    (the scoring processes, at the lowest priority, get what is left)."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield
    burner.kill()
    burner.wait()


def scoring_parents(session: int) -> list[int]:
    """The parent of each scoring process among the server's processes (its session): a worker's pid each."""
    parents = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[3]) == session and b"groundtrace.scoring.child" in command:
            parents.append(int(stat[1]))
    return sorted(parents)


# ------------------------------------------------------------------------------------- servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(command: list[str], env: dict[str, str], tmp_path: Path, port: int) -> subprocess.Popen:
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server's, closed when it ends
    server = subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server exited {server.returncode}:\n{(tmp_path / 'server.log').read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/chat?q=tok-00000000", timeout=5):
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError(f"the server did not answer within 60 s:\n{(tmp_path / 'server.log').read_text()}")


def send_all(port: int, sent: list[tuple[str, str]], **params: str) -> None:
    def one(item: tuple[str, str]) -> str:
        kind, token = item
        query = urllib.parse.urlencode({"q": question(token), **params})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{kind}?{query}", timeout=60) as reply:
            return reply.read().decode()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, sent))
    for (kind, token), text in zip(sent, answers, strict=True):
        assert (token in text) == (kind != "refuse"), (kind, token, text)


def stop(server: subprocess.Popen, tmp_path: Path) -> str:
    """SIGTERM to the master: it ends within 20 s; what it and its workers said."""
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        raise AssertionError(f"SIGTERM: still running after 20 s:\n{(tmp_path / 'server.log').read_text()}") from None
    assert time.monotonic() - started < 20
    return (tmp_path / "server.log").read_text()


def lost_said(log: str) -> None:
    """Nothing of the RAG requests lost: no WARNING of records not scored, and no traceback."""
    assert "not scored when the Monitor closed" not in log and "Traceback" not in log, log[-4000:]


def each_request_its_own(arguments: list[str], env: dict[str, str], tmp_path: Path, port: int,
                         half_on_threads: bool = False, launcher: bool = False) -> tuple[str, list[int]]:
    """Serve the app with Python and these arguments (under groundtrace-run with ``launcher``), send every request
    (the second half to the blocking handler on the thread pool, with ``half_on_threads``), stop the server at once
    (what the Monitors still hold is settled as the workers exit), and check each request's record is its own and nothing was lost unsaid. Returns the server's
    log and the parents of its scoring processes."""
    server = serve([*([str(LAUNCHER)] if launcher else []), sys.executable, *arguments], env, tmp_path, port)
    sent = requests()
    try:
        if half_on_threads:
            send_all(port, sent[: len(sent) // 2])
            send_all(port, sent[len(sent) // 2:], sync="1")
        else:
            send_all(port, sent)
        parents = scoring_parents(server.pid)
    finally:
        log = stop(server, tmp_path)
    assert_each_request_its_own(records(tmp_path), sent)
    lost_said(log)
    return log, parents


def worker_pids(log: str, server: str) -> list[int]:
    """The workers the server started, from its log (INFO): more than it was asked for when one was restarted."""
    said = r"Started server process \[(\d+)\]" if server == "uvicorn" else r"Booting worker with pid: (\d+)"
    return [int(pid) for pid in re.findall(said, log)]


UVICORN = ["-m", "uvicorn", "--workers", "2", "--host", "127.0.0.1", "--log-level", "info", "--no-access-log"]


def test_gunicorn_gthread_keeps_a_refused_requests_retrieval_out_of_the_next_request_on_its_thread(tmp_path):
    """2 workers x 4 threads, the WSGI app without the middleware: a pooled thread serves a request that
    retrieved and refused, then one that chats with the model; the chat is not paired with that retrieval."""
    port = free_port()
    each_request_its_own(["-m", "gunicorn", "-k", "gthread", "-w", "2", "--threads", "4", "-b", f"127.0.0.1:{port}",
                          "server_app:wsgi_app"], environment(tmp_path, GT_SERVER="wsgi"), tmp_path, port)


def test_gunicorn_preload_sync_workers_score_with_the_monitor_built_in_the_master(tmp_path):
    """--preload: the app (and instrument()'s Monitor) is imported in the master, then 2 sync workers are forked;
    each starts its own workers and scoring process with its first record. With the WSGI middleware."""
    port = free_port()
    each_request_its_own(["-m", "gunicorn", "--preload", "-w", "2", "-b", f"127.0.0.1:{port}", "server_app:wsgi_app"],
                         environment(tmp_path, GT_SERVER="wsgi", GT_MIDDLEWARE="1"), tmp_path, port)


def test_uvicorn_two_workers_async_and_threadpool_handlers(tmp_path):
    """uvicorn --workers 2 (spawned workers, each its own Monitor), the ASGI middleware; half the requests run
    their blocking handler on Starlette's thread pool, as FastAPI runs a def endpoint. No worker is restarted."""
    port = free_port()
    log, _ = each_request_its_own([*UVICORN, "--port", str(port), "server_app:asgi_app"],
                                  environment(tmp_path, GT_SERVER="asgi"), tmp_path, port, half_on_threads=True)
    assert len(worker_pids(log, "uvicorn")) == 2 and "died" not in log, log[-4000:]


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_under_groundtrace_run_only_the_workers_score_and_none_is_restarted(tmp_path, server):
    """No code change (GT_ARM=none: the app never calls instrument()): groundtrace-run instruments LangChain in
    each worker when the app imports it. The supervisor (and multiprocessing's helpers) import no framework and
    start no scoring process: at most one scoring process per worker, each that worker's child (a worker that the
    kernel handed no RAG request starts none: its Monitor starts with its first record); no worker restarted."""
    port = free_port()
    if server == "uvicorn":
        arguments = [*UVICORN, "--port", str(port), "server_app:asgi_app"]
    else:
        arguments = ["-m", "gunicorn", "-k", "gthread", "-w", "2", "--threads", "4", "-b", f"127.0.0.1:{port}",
                     "server_app:wsgi_app"]
    env = environment(tmp_path, GT_ARM="none", GT_SERVER="asgi" if server == "uvicorn" else "wsgi")
    log, parents = each_request_its_own(arguments, env, tmp_path, port, launcher=True)
    workers = worker_pids(log, server)
    assert len(workers) == 2 and "died" not in log, log[-4000:]
    assert parents and len(parents) == len(set(parents)) and set(parents) <= set(workers), \
        (parents, workers, log[-4000:])


# --------------------------------------------------------------------------------- process pools
POOL_PROGRAM = """
import json, sys
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import server_app  # instrument() runs here, in the parent: a fork child inherits its Monitor
items = [tuple(item) for item in json.loads(sys.argv[1])]
method = sys.argv[2]
if __name__ == "__main__":
    if method == "executor":
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
            print(json.dumps(list(pool.map(server_app.run, items))))
    else:
        with multiprocessing.get_context(method).Pool(2) as pool:
            print(json.dumps(pool.map(server_app.run, items)))
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "executor"])
def test_process_pools_score_their_workers_records(tmp_path, method):
    """multiprocessing's Pool with fork and with spawn, and a fork ProcessPoolExecutor: the workers' records
    are scored (a fork child starts the Monitor it inherited; a spawn child builds its own), and the pool's
    terminate() at the end of the `with` is not held up by a handler the children inherited."""
    sent = requests()[:48]
    started = time.monotonic()
    items = [(kind, question(token)) for kind, token in sent]
    done = subprocess.run([sys.executable, "-c", POOL_PROGRAM, json.dumps(items), method], cwd=HERE,
                          env=environment(tmp_path), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert [token in text for (_, token), text in zip(sent, answers, strict=True)] == \
        [kind != "refuse" for kind, _ in sent]
    assert_each_request_its_own(records(tmp_path), sent)
    lost_said(done.stderr)
    assert time.monotonic() - started < 120


CELERY_APP = """
import server_app
from celery import Celery
app = Celery("gt", broker="filesystem://", backend="file://{results}")
app.conf.broker_transport_options = {{"data_folder_in": "{queue}", "data_folder_out": "{queue}"}}
app.conf.worker_hijack_root_logger = False

@app.task(name="rag")
def run(kind, text):
    return server_app.run((kind, text))
"""


def celery_client(tmp_path: Path):
    """The producer's side: the same broker and results, no task code (the test process instruments nothing)."""
    from celery import Celery

    app = Celery("gt", broker="filesystem://", backend=f"file://{tmp_path / 'results'}")
    app.conf.broker_transport_options = {"data_folder_in": str(tmp_path / "queue"),
                                         "data_folder_out": str(tmp_path / "queue")}
    return app


def test_a_celery_prefork_worker_scores_each_tasks_record(tmp_path):
    """A real Celery worker (prefork pool of 2, the filesystem broker, file results) runs the endpoint as tasks;
    its pool children are forked from the worker that imported the app and built the Monitor."""
    pytest.importorskip("celery")
    (tmp_path / "queue").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "celery_tasks.py").write_text(CELERY_APP.format(queue=tmp_path / "queue", results=tmp_path / "results"))
    env = environment(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "--pool", "prefork",
                               "-c", "2", "--loglevel", "WARNING"], cwd=tmp_path, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    sent = requests()[:48]
    try:
        client = celery_client(tmp_path)
        results = [client.send_task("rag", args=[kind, question(token)]) for kind, token in sent]
        answers = [result.get(timeout=120) for result in results]
    finally:
        text = stop(worker, tmp_path)
    assert [token in answer for (_, token), answer in zip(sent, answers, strict=True)] == \
        [kind != "refuse" for kind, _ in sent]
    assert_each_request_its_own(records(tmp_path), sent)
    lost_said(text)
