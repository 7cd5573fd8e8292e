"""deploy/ and the scrape: the Monitor's live Prometheus endpoint passes `promtool check metrics`; the alert
rules pass promtool (its syntax check, and unit tests firing every alert with the annotations the file ships);
their names follow Prometheus's conventions and every runbook_url leads to a section of the docs; and every
series the rules and the Grafana dashboard name is one the endpoint really serves."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml
from markdown.extensions.toc import slugify

from groundtrace.monitor import Monitor
from tests.prometheus_server import DASHBOARD, PROMTOOL, ROOT, RULES, needs_prometheus, panel_queries, short_rules
from tests.telemetry.conftest import FLAGGED, GROUNDED
from tests.telemetry.test_telemetry_values import Judged

# a series or label name of groundtrace's or the GenAI conventions', not part of a recording rule's name
SERIES = re.compile(r"(?<![:\w])(?:groundtrace|gen_ai)_[a-z_]+(?![:\w])")
SHIPPED_RULES = yaml.safe_load(RULES.read_text(encoding="utf-8"))
ALL_RULES = [rule for group in SHIPPED_RULES["groups"] for rule in group["rules"]]
ALERTS = {rule["alert"]: rule for rule in ALL_RULES if "alert" in rule}


def promtool(*args: str, cwd=None, stdin: str | None = None) -> str:
    done = subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True, timeout=60, cwd=cwd, input=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def live_scrape() -> str:
    """The exposition of a Monitor that scored a flagged and a grounded answer with an offline metric and a
    judge metric (so the judge's token histogram has series too)."""
    with Monitor(["lexical", Judged()], "none", telemetry="prometheus:127.0.0.1:0", isolation="thread") as monitor:
        monitor.submit(FLAGGED)
        monitor.submit(GROUNDED)
        monitor.flush(30)
        time.sleep(0.6)  # past the endpoint's cache of the exposition
        return urllib.request.urlopen(monitor.telemetry.endpoint.url, timeout=10).read().decode()


@needs_prometheus
def test_promtool_accepts_the_live_scrape() -> None:
    """The lint Prometheus's own tool runs: no quantile label on a non-summary, counters end in _total, units
    in base units; and the resource in target_info, not on each series."""
    scrape = live_scrape()
    assert promtool("check", "metrics", stdin=scrape) == ""  # no finding at all
    assert "quantile=" not in scrape and re.search(r"^target_info\{.*service_name=", scrape, re.M)
    assert "groundtrace_monitor_scoring_duration_seconds_bucket{" in scrape
    assert re.search(r'^gen_ai_client_token_usage_sum\{.*gen_ai_token_type="input".*\} 240\.0$', scrape, re.M)


@needs_prometheus
def test_promtool_checks_the_rules_as_shipped_and_as_shortened(tmp_path) -> None:
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", str(RULES))
    (tmp_path / "short.yml").write_text(short_rules(), encoding="utf-8")
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", str(tmp_path / "short.yml"))


def test_recording_rules_are_named_level_metric_operations() -> None:
    """level: the labels the result keeps (none for a threshold); metric: the series it comes from, _total
    dropped (a ratio as A_per_B); operations: what was done, the last first."""
    names = {rule["record"]: rule["expr"] for rule in ALL_RULES if "record" in rule}
    assert set(names) == {
        ":groundtrace_evaluations_flagged_per_scored:threshold",
        ":groundtrace_evaluations_errors_per_evaluations:threshold",
        ":groundtrace_monitor_dropped:threshold_increase10m",
        ":groundtrace_monitor_seconds_since_progress:threshold",
        "job_gen_ai_evaluation_name:groundtrace_evaluations_flagged_per_scored:ratio_rate10m",
        "job_gen_ai_evaluation_name:groundtrace_evaluations_errors_per_evaluations:ratio_rate10m"}
    for name, expr in names.items():
        level, metric, operations = name.split(":")
        if operations.startswith("ratio_rate"):
            assert {f"sum by ({level.replace('_gen_ai', ', gen_ai')}) (rate("} == set(re.findall(r"sum by \([^)]*\) \(rate\(", expr))
            assert metric.startswith("groundtrace_evaluations_") and f"[{operations.removeprefix('ratio_rate')}]" in expr
        else:
            assert level == "" and expr.startswith("vector(")


def test_every_alert_has_severity_summary_description_and_a_runbook_section() -> None:
    assert set(ALERTS) == {"GroundtraceFlaggedRateHigh", "GroundtraceEvaluatorErrors", "GroundtraceDroppingRecords",
                           "GroundtraceNotEvaluating", "GroundtraceStalled", "GroundtraceWorkersDown"}
    runbooks = ROOT / "docs" / "how-to" / "runbooks.md"
    sections = {slugify(heading, "-") for heading in re.findall(r"^## (\w+)$", runbooks.read_text(encoding="utf-8"), re.M)}
    for name, rule in ALERTS.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        assert len(annotations["description"]) > 80, name
        # a page of the docs site (mkdocs: docs/how-to/runbooks.md is served at how-to/runbooks/), its section
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == "how-to/runbooks/" and anchor == name.lower() and anchor in sections, name
    nav = yaml.safe_load(re.sub(r"!!python\S*", "", (ROOT / "mkdocs.yml").read_text(encoding="utf-8")))["nav"]
    assert "how-to/runbooks.md" in json.dumps(nav)


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    selector = ",".join(f'{key}="{value}"' for key, value in {"job": "rag", "instance": "app:9464", **labels}.items())
    return {"series": f"{name}{{{selector}}}", "values": values}


def quiet(at: str, alert: str) -> dict:
    return {"eval_time": at, "alertname": alert, "exp_alerts": []}


def firing(at: str, alert: str, summary: str, **labels: str) -> dict:
    """The alert firing with these labels (job rag and its severity added) and this rendered summary; its
    description and runbook_url as the file has them."""
    rule = ALERTS[alert]
    annotations = {**rule["annotations"], "summary": summary}
    return {"eval_time": at, "alertname": alert, "exp_alerts": [
        {"exp_labels": {"job": "rag", **labels, "severity": rule["labels"]["severity"]}, "exp_annotations": annotations}]}


def run_rule_tests(tmp_path: Path, input_series: list[dict], alert_rule_test: list[dict]) -> None:
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": alert_rule_test}]}
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)


@needs_prometheus
def test_promtool_unit_tests_of_the_drop_stall_workers_and_not_evaluating_alerts(tmp_path) -> None:
    """Series as the endpoint writes them, one sample a minute (promtool's clock starts at Unix time 0, so
    a last-progress timestamp of 600 is minute 10); the alerts as the file ships them."""
    run_rule_tests(tmp_path, [
        series("groundtrace_monitor_submitted_total", "0+10x30"),  # traffic all along
        series("groundtrace_monitor_sampled_out_total", "0x30"),
        series("groundtrace_monitor_excluded_total", "0x30"),
        series("groundtrace_monitor_dropped_total", "0x10 5x20"),  # 5 dropped at minute 11
        # evaluations come back for 10 minutes, then stop while the traffic goes on
        series("groundtrace_evaluations_total", "0+10x10 100x20", gen_ai_evaluation_name="lexical",
               groundtrace_outcome="passed"),
        # progress every minute until minute 10, then none while 3 records wait
        series("groundtrace_monitor_last_progress_timestamp_seconds", "0+60x10 600x20"),
        series("groundtrace_monitor_queued", "0x10 3x20"),
        series("groundtrace_monitor_workers", "1x30"),
        # a second instance, idle since the start (no progress, nothing waits): not stalled, its worker died at 20
        series("groundtrace_monitor_last_progress_timestamp_seconds", "0x30", instance="idle:9464"),
        series("groundtrace_monitor_queued", "0x30", instance="idle:9464"),
        series("groundtrace_monitor_workers", "1x20 0x10", instance="idle:9464"),
    ], [
        quiet("9m", "GroundtraceNotEvaluating"), quiet("9m", "GroundtraceDroppingRecords"),
        firing("12m", "GroundtraceDroppingRecords", summary="groundtrace dropped 5 records of rag in 10 minutes"),
        quiet("12m", "GroundtraceStalled"),  # 120 s since progress: not yet over the threshold
        firing("13m", "GroundtraceStalled", instance="app:9464",
               summary="groundtrace in rag (app:9464) has settled no record for 3m 0s while records wait"),
        # evaluations stopped after minute 10: the 10-minute window still sees some until minute 20,
        # then 5 minutes of `for:`
        quiet("24m", "GroundtraceNotEvaluating"),
        firing("26m", "GroundtraceNotEvaluating", summary="rag takes traffic and groundtrace evaluates none of it"),
        quiet("20m", "GroundtraceWorkersDown"),
        firing("22m", "GroundtraceWorkersDown", instance="idle:9464",
               summary="groundtrace's Monitor in rag (idle:9464) has no worker running: nothing is scored"),
    ])


@needs_prometheus
def test_promtool_unit_tests_of_the_alerts_over_the_worker_processes_of_one_target(tmp_path) -> None:
    """One target served by two worker processes, as the shared scrape writes it (groundtrace.telemetry.scrape):
    the counters summed into one series, a gauge series per process (its pid label). Worker 102 stops at
    minute 10 with 3 records waiting while worker 101 goes on: the stall alert fires for 102, its progress not
    hidden by 101's; 102's Monitor stops at minute 20: workers-down fires though 101 runs on."""
    run_rule_tests(tmp_path, [
        series("groundtrace_monitor_submitted_total", "0+10x30"),
        series("groundtrace_monitor_sampled_out_total", "0x30"),
        series("groundtrace_monitor_excluded_total", "0x30"),
        series("groundtrace_evaluations_total", "0+10x30", gen_ai_evaluation_name="lexical", groundtrace_outcome="passed"),
        series("groundtrace_monitor_last_progress_timestamp_seconds", "0+60x30", pid="101"),
        series("groundtrace_monitor_queued", "0x30", pid="101"),
        series("groundtrace_monitor_workers", "1x30", pid="101"),
        series("groundtrace_monitor_last_progress_timestamp_seconds", "0+60x10 600x20", pid="102"),
        series("groundtrace_monitor_queued", "0x10 3x20", pid="102"),
        series("groundtrace_monitor_workers", "1x20 0x10", pid="102"),
    ], [
        quiet("12m", "GroundtraceStalled"),
        firing("13m", "GroundtraceStalled", instance="app:9464", pid="102",
               summary="groundtrace in rag (app:9464) has settled no record for 3m 0s while records wait"),
        quiet("13m", "GroundtraceNotEvaluating"), quiet("13m", "GroundtraceDroppingRecords"),
        quiet("20m", "GroundtraceWorkersDown"),
        firing("22m", "GroundtraceWorkersDown", instance="app:9464",
               summary="groundtrace's Monitor in rag (app:9464) has no worker running: nothing is scored"),
    ])


@needs_prometheus
def test_promtool_unit_tests_of_the_flagged_rate_and_error_alerts(tmp_path) -> None:
    """A judge metric that flags 2 of every 8 answers it scores and fails on 2 of every 10: 25% flagged (over
    the 20% threshold), 20% errors (over 5%), each firing after its 5 minutes of `for:`."""
    outcomes = {"flagged": "0+2x20", "passed": "0+6x20", "error": "0+2x20"}
    run_rule_tests(tmp_path, [
        *(series("groundtrace_evaluations_total", values, gen_ai_evaluation_name="judged", groundtrace_outcome=outcome)
          for outcome, values in outcomes.items()),
        # another metric, all passed: never part of an alert
        series("groundtrace_evaluations_total", "0+10x20", gen_ai_evaluation_name="lexical", groundtrace_outcome="passed"),
    ], [
        quiet("5m", "GroundtraceFlaggedRateHigh"), quiet("5m", "GroundtraceEvaluatorErrors"),  # still pending
        firing("10m", "GroundtraceFlaggedRateHigh", gen_ai_evaluation_name="judged",
               summary="judged flags 25% of the answers of rag"),
        firing("10m", "GroundtraceEvaluatorErrors", gen_ai_evaluation_name="judged",
               summary="judged fails on 20% of the answers of rag"),
    ])


def test_every_series_the_rules_and_the_dashboard_name_is_served(in_tmp) -> None:
    served = set(SERIES.findall(live_scrape()))
    named = {name for rule in ALL_RULES for name in SERIES.findall(rule["expr"])}
    queries = panel_queries({"job": ".*", "metric": ".*", "__rate_interval": "1m", "__range": "1h",
                             "flagged_threshold": "0.2"})
    named |= {name for targets in queries.values() for expr, _ in targets for name in SERIES.findall(expr)}
    assert len(named) > 15 and named <= served, named - served
    # groundtrace's own series in its namespace; in gen_ai_*, upstream's series and attribute keys only
    assert {name for name in named if name.startswith("gen_ai_")} == {
        "gen_ai_client_token_usage_sum", "gen_ai_evaluation_name", "gen_ai_evaluation_score_label", "gen_ai_token_type"}


def test_the_dashboard_is_grafana_json_that_asks_for_its_data_source_on_import() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    [source] = dashboard["__inputs"]
    assert (source["name"], source["type"], source["pluginId"]) == ("DS_PROMETHEUS", "datasource", "prometheus")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"job", "metric", "flagged_threshold"}
    assert variables["flagged_threshold"]["query"] == "0.2"  # the rules' default threshold
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert {"Flagged rate per metric", "Flagged rate per language", "Score distribution", "Evaluations per minute",
            "Records per minute, by what became of them", "Queue, workers, stall", "Scoring latency"} <= set(titles)
    # every data source reference is the input, so the import's choice reaches every query
    sources = re.findall(r'"uid": "([^"]*)"', json.dumps({k: v for k, v in dashboard.items() if k != "uid"}))
    assert sources and set(sources) == {"${DS_PROMETHEUS}"}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}" and panel["targets"], panel["title"]
    [heatmap] = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    assert heatmap["targets"][0]["exemplar"] is True  # a spike's exemplars lead to the flagged traces
    [latency] = [p for p in dashboard["panels"] if p["title"] == "Scoring latency"]
    assert [t["expr"].split("(")[0] for t in latency["targets"]] == ["histogram_quantile", "histogram_quantile", "sum"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
