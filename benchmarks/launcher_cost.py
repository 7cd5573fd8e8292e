"""What ``groundtrace-run`` costs where it is not needed: a process's start, and a server's readiness.

    python benchmarks/launcher_cost.py [--runs 10] [--rounds 5] [--busy] [--servers uvicorn,gunicorn]

1. ``python -c pass`` plain and under ``groundtrace-run``, alternated, ``--runs`` of each: the median wall time of
   each and their difference (the goal: within 100 ms).
2. ``uvicorn --workers 2`` and ``gunicorn -w 2`` serving a small app that imports LangChain (as an app that
   groundtrace-run instruments does), plain and under groundtrace-run, alternated, ``--rounds`` of each: the time
   from the command's start until both workers have imported the app and a request is answered, and how many
   workers were started (2 when none was restarted). With ``--busy`` a process burns one core meanwhile, as on a
   loaded machine (the goal: within 1.2x plain, no worker restarted).

Prints the medians and the ratio of the medians; asserts nothing (it is not a test).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

LAUNCHER = str(Path(sys.executable).with_name("groundtrace-run"))
WORKERS = 2

# an app as a user writes it: it imports LangChain and never groundtrace; each worker notes its pid once imported
APP = '''
import os

from langchain_core.language_models.fake_chat_models import FakeListChatModel

MODEL = FakeListChatModel(responses=["ok"])


def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


with open(os.environ["READY_FILE"], "a") as ready:
    ready.write(f"{os.getpid()}\\n")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    env.update(GROUNDTRACE_METRICS="lexical", GROUNDTRACE_SINKS="none", **extra)
    return env


@contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """One core burnt at normal priority while the block runs (a loaded machine)."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


def start_cost(runs: int) -> None:
    command = [sys.executable, "-c", "pass"]
    times: dict[str, list[float]] = {"plain": [], "groundtrace-run": []}
    env = environment()
    for _ in range(runs + 1):  # the first pair warms the file cache: not counted
        for arm, argv in (("plain", command), ("groundtrace-run", [LAUNCHER, *command])):
            started = time.perf_counter()
            subprocess.run(argv, env=env, check=True)
            times[arm].append(time.perf_counter() - started)
    plain, launched = (statistics.median(times[arm][1:]) * 1000 for arm in ("plain", "groundtrace-run"))
    print(f"python -c pass: plain {plain:.0f} ms, groundtrace-run {launched:.0f} ms (median of {runs}), "
          f"difference {launched - plain:+.0f} ms")


def server_command(server: str, port: int) -> list[str]:
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "--workers", str(WORKERS), "--host", "127.0.0.1", "--port", str(port),
                "--log-level", "warning", "app:asgi_app"]
    return [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}", "--log-level", "warning",
            "app:wsgi_app"]


def readiness(server: str, launched: bool, folder: Path, settle_s: float = 2.0) -> tuple[float, int]:
    """Seconds until every worker imported the app and a request is answered; the workers started by then plus
    ``settle_s`` (more than WORKERS: one was restarted)."""
    port, ready = free_port(), folder / f"ready-{time.monotonic_ns()}"
    command = server_command(server, port)
    if launched:
        command = [LAUNCHER, *command]
    with open(folder / "server.log", "a") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=folder, env=environment(READY_FILE=str(ready),
                                PYTHONPATH=str(folder)), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{server} exited {proc.returncode}: see {folder / 'server.log'}")
                pids = ready.read_text().split() if ready.exists() else []
                if len(pids) >= WORKERS:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):
                            break
                    except OSError:
                        pass
                if time.perf_counter() - started > 120:
                    raise RuntimeError(f"{server} not ready within 120 s")
                time.sleep(0.01)
            took = time.perf_counter() - started
            time.sleep(settle_s)
            return took, len(ready.read_text().split())
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def server_cost(servers: list[str], rounds: int, busy: bool) -> None:
    with tempfile.TemporaryDirectory() as name, busy_core(busy):
        folder = Path(name)
        (folder / "app.py").write_text(APP)
        for server in servers:
            took: dict[bool, list[float]] = {False: [], True: []}
            started: dict[bool, list[int]] = {False: [], True: []}
            readiness(server, False, folder)  # warm the file cache
            for _ in range(rounds):
                for launched in (False, True):
                    seconds, workers = readiness(server, launched, folder)
                    took[launched].append(seconds)
                    started[launched].append(workers)
            plain, under = statistics.median(took[False]), statistics.median(took[True])
            print(f"{server} {WORKERS} workers{' (one core busy)' if busy else ''}: ready in {plain:.2f} s plain, "
                  f"{under:.2f} s under groundtrace-run (medians of {rounds}), ratio {under / plain:.2f}; workers "
                  f"started: plain {started[False]}, groundtrace-run {started[True]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each arm of python -c pass")
    parser.add_argument("--rounds", type=int, default=5, help="server starts of each arm")
    parser.add_argument("--busy", action="store_true", help="one core burnt while the servers start")
    parser.add_argument("--servers", default="uvicorn,gunicorn")
    args = parser.parse_args()
    start_cost(args.runs)
    server_cost([s for s in args.servers.split(",") if s], args.rounds, args.busy)


if __name__ == "__main__":
    main()
