"""One scrape shows every worker: a real Prometheus (Debian's) scraping real gunicorn (sync, gthread, --preload)
and uvicorn --workers 2 serving workers_app.py, with GROUNDTRACE_TELEMETRY=prometheus. Requests spread over the
workers each make a record; the scraped totals are the requests sent (60 of 60, not one worker's share), the
live-worker gauge has one series per worker that answered (never the --preload master's), the shipped alert
fires on the planted answers and nothing else fires. When the worker serving the endpoint is killed, another
serves it, with the dead worker's counts kept and its gauges gone. The rules are the shipped file with 20 s
windows and 2 s waits (tests/prometheus_server.short_rules)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.phoenix_server import free_port
from tests.prometheus_server import Prometheus, needs_prometheus, prometheus, short_rules

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn")

HERE = Path(__file__).resolve().parent
SERVERS = {
    "gunicorn-sync": ["-m", "gunicorn", "-w", "2"],
    "gunicorn-gthread": ["-m", "gunicorn", "-w", "2", "-k", "gthread", "--threads", "4"],
    "gunicorn-preload": ["-m", "gunicorn", "-w", "2", "--preload"],
    "uvicorn": ["-m", "uvicorn", "--workers", "2"],
}
#: one round of requests: a third planted (over the shipped 20% threshold), spread over 8 clients
ROUND = ["planted" if i % 3 == 0 else "grounded" for i in range(60)]


@dataclass
class Served:
    port: int
    metrics_port: int
    process: subprocess.Popen
    log: Path

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as reply:
            return reply.read()

    def ask(self, kinds: list[str]) -> list[int]:
        """Each request (8 at once); the pid of the worker that answered each."""
        with ThreadPoolExecutor(8) as pool:
            return [int(pid) for pid in pool.map(lambda kind: self.get(f"/ask?kind={kind}"), kinds)]


@contextmanager
def serving(kind: str, tmp_path: Path) -> Iterator[Served]:
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDTRACE_", "PROMETHEUS_MULTIPROC"))}
    env.update(GROUNDTRACE_TELEMETRY=f"prometheus:127.0.0.1:{metrics_port}", GROUNDTRACE_ISOLATION="thread",
               GROUNDTRACE_EXIT_FLUSH_S="10", PYTHONUNBUFFERED="1")
    address = ["--host", "127.0.0.1", "--port", str(port)] if kind == "uvicorn" else ["-b", f"127.0.0.1:{port}"]
    app = "workers_app:asgi_app" if kind == "uvicorn" else "workers_app:wsgi_app"
    log = tmp_path / "server.log"
    with open(log, "wb") as out:  # the server's own handle stays open in it
        process = subprocess.Popen([sys.executable, *SERVERS[kind], *address, app], cwd=HERE, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(port, metrics_port, process, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                served.get("/serving")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the server did not start:\n{log.read_text(errors='replace')[-3000:]}") from None
                time.sleep(0.2)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def value(server: Prometheus, expr: str) -> float | None:
    found = server.query(expr)
    return float(found[0]["value"][1]) if len(found) == 1 else None


def gauge_pids(server: Prometheus) -> set[int]:
    return {int(series["metric"]["pid"]) for series in server.query("groundtrace_monitor_workers")}


def spread(served: Served, limit: int = 5) -> tuple[int, int, set[int]]:
    """Rounds of requests until two workers have answered: (sent, planted, the pids that answered)."""
    pids: set[int] = set()
    sent = planted = 0
    for _ in range(limit):
        pids |= set(served.ask(ROUND))
        sent, planted = sent + len(ROUND), planted + ROUND.count("planted")
        if len(pids) >= 2:
            break
    assert len(pids) == 2, f"{sent} requests, all answered by {pids}"
    return sent, planted, pids


def settled(server: Prometheus, sent: int, planted: int) -> None:
    """Wait until the scrape shows every request's record scored (60 s: the machine may be busy)."""
    server.wait_for(lambda: value(server, "sum(groundtrace_monitor_submitted_total)") == sent and
                    value(server, "sum(groundtrace_evaluations_total)") == sent, 60,
                    f"the scrape shows all {sent} records, not one worker's share")
    assert value(server, 'sum(groundtrace_evaluations_total{groundtrace_outcome="flagged"})') == planted
    assert value(server, "sum(groundtrace_monitor_scored_total)") == sent
    assert value(server, "sum(groundtrace_evaluation_score_count)") == sent  # the histograms, summed


@needs_prometheus
@pytest.mark.parametrize("kind", list(SERVERS))
def test_one_scrape_shows_every_worker_and_the_alert_fires(kind: str, tmp_path: Path) -> None:
    with serving(kind, tmp_path) as served, \
            prometheus(tmp_path / "prometheus", [f"127.0.0.1:{served.metrics_port}"], short_rules("20s", "2s")) as server:
        # the series are there before any request, zeros included: under --preload too (the master's counts)
        server.wait_for(lambda: value(server, "sum(groundtrace_monitor_submitted_total)") == 0, 60, "a first scrape")
        sent, planted, pids = spread(served)
        settled(server, sent, planted)
        # one live-worker series per worker process, each with its one scoring thread: never the master's
        server.wait_for(lambda: gauge_pids(server) == pids, 30, f"the workers' gauges: {pids}")
        assert value(server, "sum(groundtrace_monitor_workers)") == 2
        assert served.process.pid not in gauge_pids(server)
        assert value(server, "sum(groundtrace_monitor_queued)") == 0
        server.wait_for(lambda: server.alerts().get("GroundtraceFlaggedRateHigh") == "firing", 60, "the alert fires")
        assert set(server.alerts()) == {"GroundtraceFlaggedRateHigh"}, server.alerts()  # no stall, no worker down
        print(f"{kind}: {sent} requests over workers {sorted(pids)}; scraped "
              f"{value(server, 'sum(groundtrace_monitor_submitted_total)'):g} submitted, "
              f"{value(server, 'sum(groundtrace_evaluations_total)'):g} evaluations, "
              f"{value(server, 'sum(groundtrace_monitor_workers)'):g} live workers")
        if kind == "gunicorn-sync":
            taken_over(served, server, sent, planted)


def taken_over(served: Served, server: Prometheus, sent: int, planted: int) -> None:
    """The worker that serves the endpoint is killed: gunicorn starts another, a live one serves the endpoint,
    and the scrape still counts every record, the dead worker's included; its gauges are gone."""
    found: set[int] = set()
    with ThreadPoolExecutor(8) as pool:  # requests at once, so that both workers answer some
        for _ in range(20):
            answers = [json.loads(reply) for reply in pool.map(served.get, ["/serving"] * 16)]
            found |= {answer["pid"] for answer in answers if answer["serving"]}
            if found:
                break
    [killed] = found
    os.kill(killed, signal.SIGKILL)
    server.wait_for(lambda: len(gauge_pids(server)) == 2 and killed not in gauge_pids(server), 60,
                    "the killed worker's gauges gone, its replacement's there")
    settled(server, sent, planted)  # the dead worker's counts are kept
    more, more_planted, _ = spread(served)
    settled(server, sent + more, planted + more_planted)
