"""What groundtrace costs a RAG endpoint in a real server: uvicorn and gunicorn serve the endpoint of
integrations/langchain/tests/server_app.py (a retrieval marked @groundtrace.retrieval, a LangChain chat model called
by hand) on loopback, and a client in this process sends it requests, in one run, for each arm:

    none         no handler at all
    noop         a LangChain handler that does nothing (what the framework charges for any handler)
    capture      groundtrace, every record sampled out (GROUNDTRACE_SAMPLE_RATE=0): the request path only
    scored       groundtrace as shipped: every answer scored (GROUNDTRACE_METRICS, default grounding) in the
                 background, by a scoring process at the lowest CPU priority
    budget       the same with GROUNDTRACE_CPU_BUDGET=0.25 (a quarter of a core; records beyond it not scored)

    python benchmarks/server_cost.py [--servers uvicorn,gunicorn] [--requests 400] [--rounds 3] [--concurrency 4]

One worker process per server (gunicorn: gthread with 4 threads), so its CPU is the request path's; the scoring
process's CPU is counted apart. Arms alternate within each round (none, noop, capture, scored, budget, then the
next round), each on a fresh server, measured once it is idle after 50 warm-up requests: prints each arm's latency p50 and p99 (medians over rounds), the worker's CPU per
request, the scoring process's CPU per request, and capture's and scored's p50 against noop's.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "integrations" / "langchain" / "tests"
ARMS = {"none": {"GT_ARM": "none"}, "noop": {"GT_ARM": "noop"},
        "capture": {"GT_ARM": "groundtrace", "GROUNDTRACE_SAMPLE_RATE": "0"}, "scored": {"GT_ARM": "groundtrace"},
        "budget": {"GT_ARM": "groundtrace", "GROUNDTRACE_CPU_BUDGET": "0.25"}}
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(server: str, port: int) -> list[str]:
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                "server_app:asgi_app"]
    return [sys.executable, "-m", "gunicorn", "-k", "gthread", "-w", "1", "--threads", "4", "-b", f"127.0.0.1:{port}",
            "--log-level", "warning", "server_app:wsgi_app"]


def session_cpu(session: int) -> tuple[float, float]:
    """CPU seconds of the server's processes (the session it leads): (the server's own, the scoring processes')."""
    own = scoring = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) != session:  # field 6 of stat: the session id
                continue
            seconds = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
            if b"groundtrace.scoring.child" in (entry / "cmdline").read_bytes():
                scoring += seconds
            else:
                own += seconds
        except (OSError, IndexError, ValueError):
            continue
    return own, scoring


def settle(session: int, quiet_s: float = 0.05, limit_s: float = 120.0) -> None:
    """Wait until the server's processes are idle (the scoring process has loaded its model, and scored what the
    warm-up sent): a second in which they used less than ``quiet_s`` of CPU."""
    deadline = time.monotonic() + limit_s
    last = sum(session_cpu(session))
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sum(session_cpu(session))
        if now - last < quiet_s:
            return
        last = now


def run_arm(server: str, arm: str, requests: int, concurrency: int, scratch: Path) -> dict:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    env.update(PYTHONPATH=str(APP), GT_SERVER="asgi" if server == "uvicorn" else "wsgi",
               GROUNDTRACE_JSONL_PATH=str(scratch / f"{server}-{arm}.jsonl"), **ARMS[arm])
    process = subprocess.Popen(command(server, port), cwd=APP, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/chat?q=tok-00000000", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{server} ({arm}) did not start") from None
                time.sleep(0.2)

        def one(_: int) -> float:
            token = f"tok-{uuid.uuid4().hex[:8]}"
            query = urllib.parse.urlencode({"q": f"How long do refunds take for order {token}?"})
            started = time.perf_counter()
            urllib.request.urlopen(f"{base}/rag?{query}", timeout=60).read()
            return time.perf_counter() - started

        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(50)))  # warm-up: imports, the first records
            settle(process.pid)
            cpu_before = session_cpu(process.pid)
            latencies = sorted(pool.map(one, range(requests)))
            cpu_after = session_cpu(process.pid)
        return {"p50": latencies[len(latencies) // 2] * 1000, "p99": latencies[int(len(latencies) * 0.99)] * 1000,
                "cpu": (cpu_after[0] - cpu_before[0]) / requests * 1000,
                "scoring_cpu": (cpu_after[1] - cpu_before[1]) / requests * 1000}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="uvicorn,gunicorn")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    import tempfile

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; {args.requests} requests x {args.rounds} rounds, "
          f"{args.concurrency} at a time, after 50 to warm up")
    with tempfile.TemporaryDirectory() as folder:
        for server in args.servers.split(","):
            runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
            for _ in range(args.rounds):
                for arm in ARMS:
                    runs[arm].append(run_arm(server, arm, args.requests, args.concurrency, Path(folder)))
            print(f"\n{server} (one worker{'' if server == 'uvicorn' else ', gthread x 4'}):")
            print(f"  {'arm':8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>11} {'scoring CPU ms/req':>19}")
            medians = {arm: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for arm, rs in runs.items()}
            for arm, m in medians.items():
                print(f"  {arm:8} {m['p50']:8.2f} {m['p99']:8.2f} {m['cpu']:11.2f} {m['scoring_cpu']:19.2f}")
            noop = medians["noop"]["p50"]
            print("  p50 against noop: " + ", ".join(f"{arm} {medians[arm]['p50'] / noop - 1:+.1%}"
                                                     for arm in ("capture", "scored", "budget")))


if __name__ == "__main__":
    main()
