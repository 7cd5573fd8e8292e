"""The same series where they leave the process: a Prometheus scrape endpoint (OpenTelemetry's exporter,
prometheus_client's server), OTLP/HTTP to a collector (a loopback server decoding the protobuf), and the
application's own MeterProvider found after groundtrace started. And the settings that choose them."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from groundtrace.config import Settings
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.telemetry.endpoint import CACHE_S
from groundtrace.telemetry.providers import otlp_provider
from tests.loopback import LoopbackServer
from tests.telemetry.conftest import FLAGGED, GROUNDED, TRACE_ID


def scrape(url: str) -> dict[str, list]:
    """The samples of a scrape, by family name."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def sample(families: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for samples in families.values() for s in samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels)
    return found[0]


def test_a_prometheus_endpoint_serves_the_series_until_the_last_monitor_closes(in_tmp) -> None:
    monitor = Monitor(["lexical"], "none", telemetry="prometheus:127.0.0.1:0", isolation="thread")
    url = monitor.telemetry.endpoint.url
    port = monitor.telemetry.endpoint.port
    before = scrape(url)  # this process's endpoint may hold the series of earlier Monitors: compare increases
    flagged_before = sample(before, "groundtrace_evaluations_total", gen_ai_evaluation_name="lexical",
                            groundtrace_outcome="flagged")
    second = Monitor(["lexical"], "none", telemetry=f"prometheus:127.0.0.1:{port}", isolation="thread")
    assert second.telemetry.endpoint is monitor.telemetry.endpoint  # one server per address
    for record in (FLAGGED, GROUNDED):
        monitor.submit(record)
    monitor.flush(30)
    time.sleep(CACHE_S)  # the exposition is made at most once per CACHE_S
    after = scrape(url)
    assert sample(after, "groundtrace_evaluations_total", gen_ai_evaluation_name="lexical",
                  groundtrace_outcome="flagged") - flagged_before == 1
    assert sample(after, "groundtrace_evaluation_score_count", gen_ai_evaluation_name="lexical",
                  gen_ai_evaluation_score_label="hallucinated", groundtrace_language="ru") >= 1
    assert sample(after, "groundtrace_monitor_workers") >= 2
    assert sample(after, "groundtrace_monitor_scoring_duration_seconds_count") >= 2  # a histogram of seconds
    assert 0 < time.time() - sample(after, "groundtrace_monitor_last_progress_timestamp_seconds") < 60
    for name in ("groundtrace_monitor_dropped_total", "groundtrace_monitor_over_budget_total",
                 "groundtrace_monitor_queued", "groundtrace_judge_cost_usd_total"):
        assert name.removesuffix("_total") in after, name
    # the resource once, in target_info (OpenTelemetry's Prometheus compatibility spec), not on every series
    [info] = after["target_info"]
    assert info.value == 1 and info.labels["service_name"].startswith("unknown_service")
    assert [s.name for samples in after.values() for s in samples if "service_name" in s.labels] == ["target_info"]
    monitor.close()
    assert scrape(url)  # the second Monitor still uses it
    second.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_the_series_go_to_a_collector_over_otlp(in_tmp) -> None:
    with LoopbackServer(lambda request: (200, {})) as collector:
        endpoint = f"{collector.url}/v1/metrics"
        monitor = Monitor(["lexical"], "none", telemetry="otlp", isolation="process",
                          settings=Settings(otlp_metrics_endpoint=endpoint, sinks=[]))
        monitor.submit(FLAGGED)
        monitor.close()  # flushes groundtrace's own provider: one export now, not at the next interval
        otlp_provider(endpoint).shutdown()
        bodies = [ExportMetricsServiceRequest.FromString(r.body) for r in collector.requests if r.path == "/v1/metrics"]
    assert bodies and collector.requests[0].headers["content-type"] == "application/x-protobuf"
    # the first export (Monitor.close's flush); the SDK keeps an exemplar for one collection only
    metrics = {m.name: m for rm in bodies[0].resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"groundtrace.evaluation.score", "groundtrace.evaluations", "groundtrace.monitor.dropped",
            "groundtrace.monitor.scoring.duration"} <= set(metrics)
    assert not {name for name in metrics if name.startswith("gen_ai.")}  # lexical asked no judge: no token usage
    [point] = metrics["groundtrace.evaluation.score"].histogram.data_points
    assert point.count == 1 and point.exemplars[0].trace_id.hex() == TRACE_ID  # the exemplar reaches the collector
    flagged = [p for p in metrics["groundtrace.evaluations"].sum.data_points
               if any(a.key == "groundtrace.outcome" and a.value.string_value == "flagged" for a in p.attributes)]
    assert [p.as_double or p.as_int for p in flagged] == [1]


APP_PROVIDER_LATER = textwrap.dedent("""
    import json, time
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    record = Record(question="When?", contexts=["The library opens at 9."], answer="The library opens at 9.")
    monitor = Monitor(["lexical"], "none", isolation="thread")  # telemetry "auto": no provider yet
    monitor.submit(record); monitor.flush(30)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider([reader]))  # the application sets its provider up later
    time.sleep(1.1)  # groundtrace looks again at most once a second
    monitor.submit(record); monitor.flush(30)
    points = {m.name: [p.value if hasattr(p, "value") else p.count for p in m.data.data_points]
              for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    monitor.close()
    print(json.dumps(points))
""")


def test_auto_finds_the_applications_provider_installed_after_groundtrace_started(in_tmp) -> None:
    done = subprocess.run([sys.executable, "-c", APP_PROVIDER_LATER], capture_output=True, text=True, timeout=120,
                          cwd=in_tmp)
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout.splitlines()[-1])
    assert points["groundtrace.monitor.submitted"] == [2]  # the Monitor's counts, from its start
    assert points["groundtrace.evaluation.score"] == [1]  # scores recorded from when there was a provider
    assert sorted(points["groundtrace.evaluations"]) == [0, 0, 1]


@pytest.mark.parametrize(("env", "endpoint"), [
    ({}, None),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, None),  # a traces backend may refuse metrics
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/", "OTEL_METRICS_EXPORTER": "otlp"},
     "http://127.0.0.1:4318/v1/metrics"),
    ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, "http://c:4318/v1/metrics"),
    ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics", "OTEL_METRICS_EXPORTER": "none"}, None),
])
def test_the_otlp_variables_that_ask_for_metrics(env: dict[str, str], endpoint: str | None) -> None:
    assert Settings.from_env(env).otlp_metrics_endpoint == endpoint


def test_telemetry_settings() -> None:
    settings = Settings.from_env({"GROUNDTRACE_TELEMETRY": "prometheus:9100", "OTEL_EXPORTER_PROMETHEUS_HOST": "0.0.0.0"})
    assert (settings.telemetry, settings.prometheus_host, settings.prometheus_port) == ("prometheus:9100", "0.0.0.0", 9464)
    assert Settings.from_json(settings.to_json()) == settings
    assert Settings.from_env({}).telemetry == "auto"
    for bad in ("prometheus:port", "statsd", "otel"):
        with pytest.raises(ValueError, match="is not one of auto, otlp, none, prometheus"):
            Settings.from_env({"GROUNDTRACE_TELEMETRY": bad})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_PROMETHEUS_PORT"):
        Settings.from_env({"OTEL_EXPORTER_PROMETHEUS_PORT": "nine"})
    with pytest.raises(ValueError, match="is not one of auto, otlp, none, prometheus"):  # a programming error
        Monitor(["lexical"], "none", telemetry="statsd", settings=Settings(sinks=[]), isolation="thread")


def test_telemetry_that_cannot_be_had_here_is_off_said_once_and_the_monitor_scores(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="groundtrace.monitor"), \
            Monitor(["lexical"], "none", telemetry="otlp", settings=Settings(sinks=[]), isolation="thread") as monitor:
        assert monitor.telemetry is None
        assert monitor.submit(Record(question="q", contexts=["c"], answer="c"))
        assert monitor.flush(10) and monitor.stats.scored == 1
    [said] = [r.getMessage() for r in caplog.records if "own metrics" in r.getMessage()]
    assert said.startswith("groundtrace: the Monitor's own metrics (telemetry='otlp') are off: telemetry 'otlp' needs "
                           "an endpoint: set OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def test_a_port_in_use_turns_the_endpoint_off_with_a_warning_naming_the_address(in_tmp, caplog) -> None:
    with socket.socket() as holder:  # something else of this machine listens there
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="groundtrace.monitor"), \
                Monitor(["lexical"], "none", telemetry=f"prometheus:127.0.0.1:{busy}", isolation="thread") as monitor:
            assert monitor.telemetry is None  # built: the application is not failed by a busy port
            assert monitor.submit(Record(question="q", contexts=["c"], answer="c"))
            assert monitor.flush(10) and monitor.stats.scored == 1
    [said] = [r.getMessage() for r in caplog.records if "own metrics" in r.getMessage()]
    assert f"cannot listen on 127.0.0.1:{busy}" in said and "prometheus:HOST:PORT" in said
