"""A real Prometheus (Debian's) scraping a real LangChain app with groundtrace attached: a burst of planted
hallucinations makes the shipped alert rule fire, the flagged-rate query equals the Monitor's own count
exactly, clean traffic makes the alert resolve, and every panel query of the shipped dashboard returns data.
The rules are the shipped file with 20 s windows and 2 s waits (tests/prometheus_server.short_rules)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.phoenix_server import free_port, stop_process
from tests.prometheus_server import Prometheus, needs_prometheus, panel_queries, prometheus, short_rules

APP = Path(__file__).resolve().parent / "prometheus_app.py"
FLAGGED = 'groundtrace_evaluations_total{gen_ai_evaluation_name="lexical", groundtrace_outcome="flagged"}'
# the flagged rate over the last 5 minutes, as the rules' recording rule writes it
RATIO = "job_gen_ai_evaluation_name:groundtrace_evaluations_flagged_per_scored:ratio_rate10m"
FLAGGED_RATE = ('sum by (gen_ai_evaluation_name) (increase(groundtrace_evaluations_total{groundtrace_outcome="flagged"}[5m]))'
                ' / (sum by (gen_ai_evaluation_name) (increase(groundtrace_evaluations_total'
                '{groundtrace_outcome=~"flagged|passed"}[5m])) > 0)')


class App:
    def __init__(self, url: str, metrics_port: int) -> None:
        self.url, self.metrics_port = url, metrics_port

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as response:
            return json.load(response)

    def ask(self, kind: str, times: int = 1) -> None:
        for _ in range(times):
            self.get(f"/ask?kind={kind}")


@pytest.fixture
def app(tmp_path) -> Iterator[App]:
    metrics_port = free_port()
    env = {**os.environ, "OTEL_SERVICE_NAME": "rag-staging"}
    process = subprocess.Popen([sys.executable, str(APP), str(metrics_port)], cwd=tmp_path, stdout=subprocess.PIPE,
                               text=True, env=env)
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("ready "), f"the app did not start: {line!r}"
        yield App(f"http://127.0.0.1:{line.split()[1]}", metrics_port)
    finally:
        if process.poll() is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{line.split()[1]}/quit", timeout=30).read()
                process.wait(timeout=30)
            except (OSError, IndexError, subprocess.TimeoutExpired):
                stop_process(process)


def sole_value(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def settled_in_prometheus(server: Prometheus, expected_flagged: int) -> float:
    """Wait until Prometheus's newest flagged sample shows every flagged answer; that sample's time."""
    server.wait_for(lambda: server.query(f"{FLAGGED} == {expected_flagged}"), 30, "the last scrape shows the burst")
    return float(server.query(f"timestamp({FLAGGED})")[0]["value"][1])


def panel_results(results: dict[str, list[tuple[list[dict], str]]]) -> str:
    """Each panel's series, named by its legend as Grafana would, and their values at the time of the query."""
    lines = []
    for title, found in results.items():
        lines.append(title)
        for result, legend in found:
            for series in result:
                name = re.sub(r"\{\{(\w+)\}\}", lambda m, labels=series["metric"]: labels.get(m.group(1), ""), legend)
                lines.append(f"    {name:<40} {float(series['value'][1]):.4g}")
    return "\n".join(lines)


@needs_prometheus
def test_a_burst_of_hallucinations_fires_the_alert_matches_the_monitor_and_resolves(tmp_path, app: App) -> None:
    started = time.monotonic()
    with prometheus(tmp_path / "prometheus", [f"127.0.0.1:{app.metrics_port}"], short_rules("20s", "2s")) as server:
        # every series is there before any traffic, zeros included ("nothing flagged" is a value)
        assert sole_value(server.wait_for(lambda: server.query(FLAGGED), 30, "a first scrape")) == 0
        assert sole_value(server.query("groundtrace_monitor_dropped_total")) == 0

        app.ask("planted", 12)
        app.ask("grounded", 4)
        stats = app.get("/stats")
        assert (stats["submitted"], stats["scored"], stats["flagged"], stats["dropped"]) == (16, 16, 12, 0)

        server.wait_for(lambda: server.alerts().get("GroundtraceFlaggedRateHigh") == "firing", 30, "the alert fires")
        # at the time of the newest sample, the counters began at 0 within the window: no extrapolation
        at = settled_in_prometheus(server, stats["flagged"])
        flagged = server.query(f"sum(increase({FLAGGED}[5m]))", at=at)
        assert sole_value(flagged) == stats["flagged"]  # exactly the Monitor's own count
        rate = server.query(FLAGGED_RATE, at=at)
        assert sole_value(rate) == stats["flagged"] / stats["scored"] == 0.75
        assert server.query(RATIO)  # the shipped recording rule, with its 20 s window

        deadline = time.monotonic() + 60  # clean traffic until the 20 s window holds no flagged answer
        while "GroundtraceFlaggedRateHigh" in server.alerts():
            assert time.monotonic() < deadline, server.alerts()
            app.ask("grounded", 3)
            time.sleep(0.5)
        assert server.alerts() == {}  # and nothing else fired: no drop, no stall, evaluations flowing
        resolved = server.query(RATIO)
        assert sole_value(resolved) <= 0.2  # the shipped threshold: the clean answers outweigh the burst
        assert resolved[0]["metric"]["job"] == "app"  # the scrape job: the service, as the rules see it
        # the resource (OTEL_SERVICE_NAME, read by the SDK) is target_info's, joined on the target's labels
        named = server.query(f"{RATIO} * on (job) group_left (service_name) max by (job, service_name) (target_info)")
        assert named[0]["metric"]["service_name"] == "rag-staging"
        assert not server.query('{__name__=~"groundtrace_.+", service_name!=""}')  # on no series of its own

        # the dashboard (after the clean traffic, which every panel's window then holds): each panel's queries, variables set as Grafana would, return data from this Prometheus
        queries = panel_queries({"job": ".*", "metric": ".*", "__rate_interval": "20s", "__range": "2m",
                                 "flagged_threshold": "0.2"})
        results = {title: [(server.query(expr), legend) for expr, legend in targets] for title, targets in queries.items()}
        empty = [expr for found, targets in zip(results.values(), queries.values(), strict=True)
                 for (result, _), (expr, _) in zip(found, targets, strict=True) if not result]
        # all but the judge's tokens: gen_ai.client.token.usage is upstream's histogram, with series from the
        # first judge call, and this app's lexical metric asks none (tests/telemetry/test_deploy.py serves them)
        assert empty == [queries["Judge tokens and spend"][0][0]], empty
        print(panel_results(results))  # what the docs page (how-to/watch-staging.md) shows of a run
        final = app.get("/stats")
        assert final["flagged"] == 12 and final["dropped"] == final["failed"] == 0
    assert time.monotonic() - started < 120
