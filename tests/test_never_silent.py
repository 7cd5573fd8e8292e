"""Never silent: live capture with no sink configured writes to the default store and says so once;
an otel sink with no TracerProvider says so once; a metric that cannot load says so once and is not
retried."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from groundtrace import Record
from groundtrace._extras import ModelUnavailableError
from groundtrace.config import Settings
from groundtrace.metrics import Metric, Result
from groundtrace.monitor import Monitor
from groundtrace.score import Score
from groundtrace.sinks.default_store import forget_announcements, live_sinks
from tests.test_monitor import Collect

QUESTION = "What is the capital of France?"
CONTEXT = "Paris is the capital of France."
#: lexical grounds the first answer and flags the other two
ANSWERS = ["Paris is the capital of France.", "The capital is Berlin, founded in 1200.",
           "The capital is Berlin, founded in 1200."]


def records():
    return [Record(id=f"r{i}", question=QUESTION, contexts=[CONTEXT], answer=answer) for i, answer in enumerate(ANSWERS)]


def announcement(path: Path) -> str:
    return (f"groundtrace: no sink configured, so scores go to {path}\n"
            f"  watch them:  groundtrace watch {path}\n"
            f"  report:      groundtrace report {path}\n"
            "  on your traces instead: sinks=[\"otel\"] or GROUNDTRACE_SINKS=otel (also langsmith, mlflow, phoenix, "
            "langfuse)")


@pytest.fixture
def unconfigured(tmp_path, monkeypatch):
    """A process with no sink configured, working in tmp_path, that has said nothing yet."""
    monkeypatch.delenv("GROUNDTRACE_SINKS", raising=False)
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    forget_announcements()
    yield tmp_path
    forget_announcements()


def said(caplog, text):
    return [r for r in caplog.records if r.name.startswith("groundtrace") and text in r.getMessage()]


# ------------------------------------------------------------------------------- which sinks
def test_settings_tell_unset_sinks_from_none():
    assert Settings.from_env({}).sinks is None
    assert Settings.from_env({"GROUNDTRACE_SINKS": " "}).sinks is None
    assert Settings.from_env({"GROUNDTRACE_SINKS": "none"}).sinks == []
    assert Settings.from_env({"GROUNDTRACE_SINKS": "None"}).sinks == []
    assert Settings.from_env({"GROUNDTRACE_SINKS": "otel,jsonl"}).sinks == ["otel", "jsonl"]
    assert Settings.from_json(Settings.from_env({}).to_json()).sinks is None


def test_the_store_path_is_absolute_and_follows_groundtrace_jsonl_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env({}).store_path == tmp_path / "groundtrace-scores.jsonl"
    assert Settings.from_env({"GROUNDTRACE_JSONL_PATH": "out/s.jsonl"}).store_path == tmp_path / "out" / "s.jsonl"


def test_live_sinks_decide_in_one_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "groundtrace-scores.jsonl"
    unset = Settings.from_env({})
    assert live_sinks(None, unset) == ([f"jsonl:{store}"], store)
    assert live_sinks(None, Settings.from_env({"GROUNDTRACE_SINKS": "none"})) == ([], None)
    assert live_sinks(None, Settings.from_env({"GROUNDTRACE_SINKS": "otel"})) == (["otel"], None)
    assert live_sinks("none", unset) == ([], None)
    assert live_sinks(["NONE"], unset) == ([], None)
    assert live_sinks([], unset) == ([], None)
    assert live_sinks("jsonl,otel", unset) == (["jsonl", "otel"], None)


# ------------------------------------------------------------------------------ the default store
@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_no_sink_writes_the_default_store_and_says_so_once(unconfigured, caplog, isolation):
    caplog.set_level(logging.WARNING, logger="groundtrace")
    store = unconfigured / "groundtrace-scores.jsonl"
    monitor = Monitor(["lexical"], isolation=isolation, flush_at_exit=False)
    assert monitor.isolation == isolation
    for record in records():
        assert monitor.submit(record)
    assert monitor.flush(60)
    monitor.close()
    rows = [json.loads(line) for line in store.read_text().splitlines()]
    assert [row["id"] for row in rows] == ["r0", "r1", "r2"]
    assert [[(s["metric"], s["hallucinated"]) for s in row["scores"]] for row in rows] == \
        [[("lexical", False)], [("lexical", True)], [("lexical", True)]]
    assert [r.getMessage() for r in said(caplog, "no sink configured")] == [announcement(store)]
    assert said(caplog, "no sink configured")[0].levelno == logging.WARNING
    assert [r.getMessage() for r in said(caplog, "answers scored")] == \
        [f"groundtrace: 3 answers scored, 2 flagged (lexical); scores in {store}"]
    assert monitor.stats.flagged == 2


def test_a_second_monitor_in_the_same_process_says_nothing_more(unconfigured, caplog):
    caplog.set_level(logging.WARNING, logger="groundtrace")
    for _ in range(2):
        with Monitor(["lexical"], isolation="thread", flush_at_exit=False) as monitor:
            monitor.submit(records()[0])
            monitor.flush(30)
    assert len(said(caplog, "no sink configured")) == 1
    assert len((unconfigured / "groundtrace-scores.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("sinks, env", [("none", None), ([], None), (None, "none")])
def test_no_sink_asked_for_writes_nothing_and_says_nothing(unconfigured, caplog, monkeypatch, sinks, env):
    if env is not None:
        monkeypatch.setenv("GROUNDTRACE_SINKS", env)
    caplog.set_level(logging.INFO, logger="groundtrace")
    with Monitor(["lexical"], sinks, isolation="thread", flush_at_exit=False) as monitor:
        for record in records():
            monitor.submit(record)
        monitor.flush(30)
    assert monitor.sinks == [] and monitor.default_store is None
    assert list(unconfigured.iterdir()) == []
    assert said(caplog, "no sink configured") == [] and said(caplog, "answers scored") == []


def test_configured_sinks_are_taken_when_none_are_given(unconfigured, caplog, monkeypatch):
    monkeypatch.setenv("GROUNDTRACE_SINKS", "jsonl:mine.jsonl")
    caplog.set_level(logging.WARNING, logger="groundtrace")
    with Monitor(["lexical"], isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(records()[0])
        monitor.flush(30)
    assert len((unconfigured / "mine.jsonl").read_text().splitlines()) == 1
    assert not (unconfigured / "groundtrace-scores.jsonl").exists()
    assert said(caplog, "no sink configured") == []


SCRIPT = """
from groundtrace import Record
from groundtrace.monitor import Monitor
monitor = Monitor(["lexical"])  # no logging configured, no sink: the default store
for i in range(3):
    monitor.submit(Record(id=f"r{i}", question="q", contexts=["Paris is the capital of France."],
                          answer="Paris is the capital." if i else "Berlin is the capital."))
monitor.flush(60)
print("submitted")
"""  # closed at exit by the Monitor's own hook


def test_with_no_logging_configured_the_message_shows_once_on_stderr(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GROUNDTRACE_SINKS", "GROUNDTRACE_JSONL_PATH")}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    store = tmp_path / "groundtrace-scores.jsonl"
    assert done.returncode == 0, done.stderr
    assert done.stdout == "submitted\n"
    assert done.stderr == (announcement(store) + "\n"
                           + f"groundtrace: 3 answers scored, 1 flagged (lexical); scores in {store}\n")
    assert len(store.read_text().splitlines()) == 3


# ------------------------------------------------------------------------------------ otel
def _otel_emits(monkeypatch, caplog, provider=None, installed=None):
    trace = pytest.importorskip("opentelemetry.trace")
    from groundtrace.sinks.otel import OTelSink

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # this process has no provider (whatever others set)
    caplog.set_level(logging.WARNING, logger="groundtrace")
    sink = OTelSink(tracer_provider=provider)
    record = Record(id="r", question="q", contexts=["c"], answer="a", trace_id="0" * 31 + "1", span_id="0" * 15 + "1")
    score = Score(metric="lexical", value=0.5, higher_is_better=True, hallucinated=False)
    sink.emit(record, [score])
    if installed is not None:
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", installed)
    for _ in range(2):
        sink.emit(record, [score])
    return said(caplog, "otel sink records no scores")


def test_an_otel_sink_with_no_provider_says_so_once(monkeypatch, caplog):
    warned = _otel_emits(monkeypatch, caplog)
    assert [r.getMessage() for r in warned] == [
        "groundtrace: the otel sink records no scores: this process has no OpenTelemetry TracerProvider. Set one up "
        "with opentelemetry-sdk (trace.set_tracer_provider(TracerProvider()) plus an exporter), or run under "
        "opentelemetry-instrument, or add jsonl to the sinks (sinks=[\"otel\", \"jsonl\"])"]
    assert warned[0].levelno == logging.WARNING


def test_an_otel_sink_with_a_provider_says_nothing(monkeypatch, caplog):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert _otel_emits(monkeypatch, caplog, provider=provider) == []
    assert len(exporter.get_finished_spans()) == 3


def test_a_provider_installed_after_the_sink_is_built_is_used(monkeypatch, caplog):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert len(_otel_emits(monkeypatch, caplog, installed=provider)) == 1  # the first emit, before it was there
    assert len(exporter.get_finished_spans()) == 2


# ----------------------------------------------------------------------- a metric that cannot load
class CannotLoad(Metric):
    name = "cannot_load"
    higher_is_better = True
    default_threshold = 0.5

    def __init__(self):
        super().__init__()
        self.loads = 0

    def prepare(self):
        self.loads += 1
        raise ModelUnavailableError("model 'no/such-model' is neither a folder on this machine nor in the cache.")

    def compute(self, record, language):
        self.prepare()
        return Result(1.0, "ok")


LOAD_ERROR = ("groundtrace: metric cannot_load cannot load: model 'no/such-model' is neither a folder on this "
              "machine nor in the cache. Records are counted failed until the setting is fixed; see the metric's "
              "options (options= or GROUNDTRACE_OPTIONS) and GROUNDTRACE_METRICS, then restart the application")
REASON = "metric cannot_load cannot load: model 'no/such-model' is neither a folder on this machine nor in the cache"


def test_a_metric_that_cannot_load_is_said_once_and_not_retried(caplog):
    caplog.set_level(logging.WARNING, logger="groundtrace")
    metric, sink = CannotLoad(), Collect()
    with Monitor([metric, "lexical"], [sink], isolation="thread", workers=2, flush_at_exit=False) as monitor:
        for record in records() + records():
            monitor.submit(record)
        assert monitor.flush(30)
    assert metric.loads == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [LOAD_ERROR]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []
    assert len(sink.rows) == 6
    for _, scores in sink.rows:
        assert [(s.metric, s.error) for s in scores] == [("cannot_load", REASON), ("lexical", None)]
    assert monitor.stats.failed == 6 and monitor.stats.scored == 0


PLUGIN = '''
import os
from groundtrace._extras import ModelUnavailableError
from groundtrace.metrics import Metric, Result

class CannotLoad(Metric):
    name = "cannot_load"
    higher_is_better = True
    default_threshold = 0.5
    def prepare(self):
        with open(os.environ["LOADS_FILE"], "a") as loads:
            loads.write("load\\n")
        raise ModelUnavailableError("model 'no/such-model' is neither a folder on this machine nor in the cache.")
    def compute(self, record, language):
        self.prepare()
        return Result(1.0, "ok")
'''


def test_in_a_scoring_process_too(tmp_path, monkeypatch, caplog):
    (tmp_path / "unloadable_metrics.py").write_text(PLUGIN)
    info = tmp_path / "unloadable_metrics-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: unloadable-metrics\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[groundtrace.metrics]\ncannot_load = unloadable_metrics:CannotLoad\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    loads = tmp_path / "loads.txt"
    monkeypatch.setenv("LOADS_FILE", str(loads))
    caplog.set_level(logging.WARNING, logger="groundtrace")
    sink = Collect()
    with Monitor(["cannot_load", "lexical"], [sink], isolation="process", flush_at_exit=False) as monitor:
        for record in records() + records():
            monitor.submit(record)
        assert monitor.flush(60)
    assert loads.read_text() == "load\n"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [LOAD_ERROR + " (in the scoring process)"]
    assert [[(s.metric, s.error) for s in scores] for _, scores in sink.rows] == \
        [[("cannot_load", REASON), ("lexical", None)]] * 6
    assert monitor.stats.failed == 6


def test_groundtrace_run_with_no_sink_writes_the_default_store_and_says_so_once(tmp_path):
    from tests.test_zero_code import LANGCHAIN_APP, LAUNCHER

    (tmp_path / "app.py").write_text(textwrap.dedent(LANGCHAIN_APP))
    env = {k: v for k, v in os.environ.items()
           if k not in ("GROUNDTRACE_SINKS", "GROUNDTRACE_JSONL_PATH", "GROUNDTRACE_ENABLED")}
    env["GROUNDTRACE_METRICS"] = "lexical"
    done = subprocess.run([str(LAUNCHER), sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    store = tmp_path / "groundtrace-scores.jsonl"
    assert done.returncode == 0, done.stderr
    assert "90 days" in done.stdout
    (line,) = [json.loads(x) for x in store.read_text().splitlines()]
    assert line["record"]["answer"] == "You can return items within 90 days."
    assert done.stderr.count(announcement(store)) == 1
    assert done.stderr.count("no sink configured") == 1
    assert f"groundtrace: 1 answer scored, 1 flagged (lexical); scores in {store}\n" in done.stderr
