"""A real Prometheus for the tests (Debian's ``prometheus`` package): loopback only, a temp data folder,
short scrape and evaluation intervals, stopped after its test. And groundtrace's deploy/ files made
ready for it: the alert rules with short windows, the dashboard's panel queries with its variables set."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.phoenix_server import free_port, stop_process

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "groundtrace-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "groundtrace-dashboard.json"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    not PROMETHEUS or not PROMTOOL,
    reason="needs Debian's prometheus (prometheus and promtool): apt-get install -y prometheus")


def short_rules(window: str = "20s", wait: str = "2s") -> str:
    """The shipped rules with every window and wait shortened, so a test sees them fire and resolve in seconds;
    nothing else of them changes (thresholds, expressions, labels)."""
    text = RULES.read_text(encoding="utf-8")
    shortened, windows = re.subn(r"\[10m\]", f"[{window}]", text)
    shortened, waits = re.subn(r"for: \d+m", f"for: {wait}", shortened)
    assert windows == 9 and waits == 6, (windows, waits)  # the file still has the shape this relies on
    return shortened


def panel_queries(values: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Each panel's PromQL and legend, by title, with the dashboard's variables (and Grafana's own) set to ``values``."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))

    def filled(expr: str) -> str:
        for name in sorted(values, key=len, reverse=True):  # $__rate_interval before $__range
            expr = expr.replace(f"${name}", values[name])
        assert "$" not in expr, expr
        return expr

    return {panel["title"]: [(filled(target["expr"]), target["legendFormat"]) for target in panel["targets"]]
            for panel in dashboard["panels"]}


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's vector (at ``at``, a Unix time; default: now)."""
        return self._get("/api/v1/query", query=expr, time=at)["result"]

    def alerts(self) -> dict[str, str]:
        """State of each active alert by name: pending or firing."""
        return {alert["labels"]["alertname"]: alert["state"] for alert in self._get("/api/v1/alerts")["alerts"]}

    def wait_for(self, condition: Any, limit_s: float, what: str) -> Any:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            found = condition()
            if found:
                return found
            time.sleep(0.25)
        raise AssertionError(f"after {limit_s:g} s: {what}")


@contextmanager
def prometheus(workdir: Path, targets: list[str], rules: str | None = None, interval: str = "1s") -> Iterator[Prometheus]:
    """Debian's prometheus scraping ``targets`` (HOST:PORT) every ``interval``, evaluating ``rules`` as often."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
              "scrape_configs": [{"job_name": "app", "static_configs": [{"targets": targets}]}]}
    if rules is not None:
        (workdir / "rules.yml").write_text(rules, encoding="utf-8")
        config["rule_files"] = [str(workdir / "rules.yml")]
    (workdir / "prometheus.yml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    port = free_port()
    log_path = workdir / "prometheus.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([str(PROMETHEUS), f"--config.file={workdir / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                                   "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    client = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{client.url}/-/ready", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"prometheus did not start: {log_path.read_text(errors='replace')[-2000:]}") from None
                time.sleep(0.2)
        yield client
    finally:
        stop_process(server)
