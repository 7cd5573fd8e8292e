"""deploy/: the Prometheus alert rules pass promtool (its syntax check, and unit tests of the alerts the
real-server test in integrations/langchain/tests does not fire), and every series the rules and the Grafana
dashboard name is one the Monitor's Prometheus endpoint really serves."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import yaml

from groundtrace.monitor import Monitor
from tests.prometheus_server import DASHBOARD, PROMTOOL, RULES, needs_prometheus, panel_queries, short_rules
from tests.telemetry.conftest import FLAGGED

SERIES = re.compile(r"\b(?:groundtrace|gen_ai)_[a-z_]+\b")


def promtool(*args: str, cwd=None) -> str:
    done = subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_prometheus
def test_promtool_checks_the_rules_as_shipped_and_as_shortened(tmp_path) -> None:
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", str(RULES))
    (tmp_path / "short.yml").write_text(short_rules(), encoding="utf-8")
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", str(tmp_path / "short.yml"))


def counter(name: str, values: str, **labels: str) -> dict[str, str]:
    selector = ",".join(f'{key}="{value}"' for key, value in {"service_name": "rag", **labels}.items())
    return {"series": f"{name}{{{selector}}}", "values": values}


def quiet(at: str, alert: str) -> dict:
    return {"eval_time": at, "alertname": alert, "exp_alerts": []}


def firing(at: str, alert: str, severity: str, summary: str) -> dict:
    """The alert firing for service rag with this rendered summary, and the description as the file has it."""
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    [rule] = [rule for group in rules["groups"] for rule in group["rules"] if rule.get("alert") == alert]
    annotations = {"summary": summary, **({"description": rule["annotations"]["description"]}
                                          if "description" in rule["annotations"] else {})}
    return {"eval_time": at, "alertname": alert,
            "exp_alerts": [{"exp_labels": {"service_name": "rag", "severity": severity}, "exp_annotations": annotations}]}


@needs_prometheus
def test_promtool_unit_tests_of_the_drop_stall_and_not_evaluating_alerts(tmp_path) -> None:
    """Series as the endpoint writes them, one sample a minute; the alerts as the file ships them."""
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [
        {"interval": "1m",
         "input_series": [
             counter("groundtrace_monitor_submitted_total", "0+10x30"),  # traffic all along
             counter("groundtrace_monitor_sampled_out_total", "0x30"),
             counter("groundtrace_monitor_excluded_total", "0x30"),
             counter("groundtrace_monitor_dropped_total", "0x10 5x20"),  # 5 dropped at minute 11
             # evaluations come back for 10 minutes, then stop while the traffic goes on
             counter("groundtrace_evaluations_total", "0+10x10 100x20", gen_ai_evaluation_name="lexical",
                     groundtrace_outcome="passed"),
             counter("groundtrace_monitor_stalled_seconds", "0x10 60+60x20"),  # 60 s at minute 11, 180 at 13
             counter("groundtrace_monitor_workers", "1x30"),
         ],
         "alert_rule_test": [
             quiet("9m", "GroundtraceNotEvaluating"), quiet("9m", "GroundtraceDroppingRecords"),
             firing("12m", "GroundtraceDroppingRecords", "warning",
                    summary="groundtrace dropped 5 records of rag in 10 minutes"),
             quiet("12m", "GroundtraceStalled"),
             firing("13m", "GroundtraceStalled", "critical",
                    summary="groundtrace in rag has settled no record for 3m 0s while records wait"),
             # evaluations stopped after minute 10: the 10-minute window still sees some until minute 20,
             # then 5 minutes of `for:`
             quiet("24m", "GroundtraceNotEvaluating"),
             firing("26m", "GroundtraceNotEvaluating", "critical",
                    summary="rag takes traffic and groundtrace evaluates none of it"),
             quiet("26m", "GroundtraceWorkersDown"),
         ]}]}
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)


def test_every_series_the_rules_and_the_dashboard_name_is_served(in_tmp) -> None:
    with Monitor(["lexical"], "none", telemetry="prometheus:127.0.0.1:0", isolation="thread") as monitor:
        monitor.submit(FLAGGED)
        monitor.flush(30)
        served = set(SERIES.findall(urllib.request.urlopen(monitor.telemetry.endpoint.url, timeout=10).read().decode()))
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    named = {name for group in rules["groups"] for rule in group["rules"] for name in SERIES.findall(rule["expr"])}
    queries = panel_queries({"service": ".*", "metric": ".*", "__rate_interval": "1m", "__range": "1h",
                             "flagged_threshold": "0.2"})
    named |= {name for targets in queries.values() for expr, _ in targets for name in SERIES.findall(expr)}
    assert len(named) > 15 and named <= served, named - served


def test_the_dashboard_is_grafana_json_with_its_variables() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "service", "metric", "flagged_threshold"}
    assert variables["flagged_threshold"]["query"] == "0.2"  # the rules' default threshold
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert {"Flagged rate per metric", "Flagged rate per language", "Score distribution", "Evaluations per minute",
            "Records per minute, by what became of them", "Queue, workers, stall"} <= set(titles)
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
    [heatmap] = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    assert heatmap["targets"][0]["exemplar"] is True  # a spike's exemplars lead to the flagged traces
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
