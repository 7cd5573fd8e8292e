"""The sinks that ship with the core: OpenTelemetry (real SDK, in-memory exporter) and JSONL."""

import json

import pytest

from groundtrace import Record, Score, Span
from groundtrace.config import Settings
from groundtrace.score import ScoredRecord
from groundtrace.sinks import build_sinks, score_label
from groundtrace.sinks.jsonl import JsonlSink
from groundtrace.sinks.otel import OTelSink

trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

SCORES = [
    Score(metric="facts", value=0.7, higher_is_better=False, hallucinated=True, threshold=0.3,
          reason="1 of 1 facts are not in the contexts: 2 500 рублей", record_id="r1",
          spans=[Span(start=16, end=28, text="2 500 рублей", label="unsupported number")]),
    Score(metric="lexical", value=None, higher_is_better=True, error="the answer is empty", reason="the answer is empty",
          record_id="r1"),
]


@pytest.fixture
def otel():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_otel_sink_emits_evaluator_children_of_the_request_span(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("request") as request:
        ctx = request.get_span_context()
    record = Record(id="r1", answer="Общежитие стоит 2 500 рублей.", contexts=["…"],
                    trace_id=format(ctx.trace_id, "032x"), span_id=format(ctx.span_id, "016x"))
    OTelSink(tracer_provider=provider).emit(record, SCORES)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    facts, lexical = spans["groundtrace.facts"], spans["groundtrace.lexical"]
    for span in (facts, lexical):
        assert span.context.trace_id == ctx.trace_id
        assert span.parent.span_id == ctx.span_id
        assert span.attributes["openinference.span.kind"] == "EVALUATOR"
    assert facts.attributes["gen_ai.evaluation.name"] == "facts"
    assert facts.attributes["gen_ai.evaluation.score.value"] == 0.7
    assert facts.attributes["gen_ai.evaluation.score.label"] == "hallucinated"
    assert facts.attributes["groundtrace.unsupported_text"] == ("2 500 рублей",)
    assert json.loads(facts.attributes["output.value"]) == {
        "score": 0.7, "label": "hallucinated", "explanation": SCORES[0].reason}
    (event,) = facts.events
    assert event.name == "gen_ai.evaluation.result"
    assert dict(event.attributes) == {
        "gen_ai.evaluation.name": "facts", "gen_ai.evaluation.score.label": "hallucinated",
        "gen_ai.evaluation.explanation": SCORES[0].reason, "gen_ai.evaluation.score.value": 0.7}
    assert "gen_ai.evaluation.score.value" not in lexical.attributes  # failed: no value, never NaN
    assert lexical.attributes["gen_ai.evaluation.score.label"] == "error"
    assert lexical.status.status_code.name == "ERROR"
    assert "session.id" not in facts.attributes  # a record with no conversation names none


def test_otel_sink_names_the_conversation_on_each_evaluator_span(otel):
    provider, exporter = otel
    record = Record(id="r1", answer="a", contexts=["c"], session_id="chat-42",
                    trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7")
    OTelSink(tracer_provider=provider).emit(record, SCORES)
    spans = exporter.get_finished_spans()
    assert [(s.attributes["gen_ai.conversation.id"], s.attributes["session.id"]) for s in spans] == \
        [("chat-42", "chat-42"), ("chat-42", "chat-42")]


def test_otel_sink_skips_records_without_trace_ids(otel):
    provider, exporter = otel
    OTelSink(tracer_provider=provider).emit(Record(id="x", answer="a", contexts=[]), SCORES)
    assert exporter.get_finished_spans() == ()


def test_jsonl_sink_appends_one_line_per_record(tmp_path):
    path = tmp_path / "deep" / "scores.jsonl"
    sink = JsonlSink(path)
    sink.emit(Record(id="r1", answer="a", contexts=["c"]), SCORES)
    sink.emit(Record(id="r2", answer="b", contexts=["c"], session_id="chat-42"), SCORES[:1])
    sink.close()
    rows = [ScoredRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r.id for r in rows] == ["r1", "r2"]
    assert [r.record.session_id for r in rows] == [None, "chat-42"]
    assert rows[0].scores == SCORES


def test_sinks_by_name_and_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("GROUNDTRACE_JSONL_PATH", str(tmp_path / "x.jsonl"))
    sinks = build_sinks("jsonl, otel")
    assert [s.name for s in sinks] == ["jsonl", "otel"]
    with pytest.raises(KeyError, match="unknown sink 'splunk'"):
        build_sinks(["splunk"])
    assert [score_label(s) for s in SCORES] == ["hallucinated", "error"]


def test_settings_from_environment():
    s = Settings.from_env({"GROUNDTRACE_ENABLED": "true", "GROUNDTRACE_METRICS": "lexical, facts",
                           "GROUNDTRACE_SAMPLE_RATE": "0.25", "GROUNDTRACE_SINKS": "otel,jsonl",
                           "GROUNDTRACE_WORKERS": "2", "GROUNDTRACE_OPTIONS": '{"facts": {"mode": "seed"}}'})
    assert (s.enabled, s.metrics, s.sample_rate, s.sinks, s.workers) == (True, ["lexical", "facts"], 0.25, ["otel", "jsonl"], 2)
    assert s.options == {"facts": {"mode": "seed"}}
    assert Settings.from_env({}).enabled is False
    with pytest.raises(ValueError, match="GROUNDTRACE_SAMPLE_RATE='lots'"):
        Settings.from_env({"GROUNDTRACE_SAMPLE_RATE": "lots"})


def test_settings_carry_the_judge_the_jsonl_path_and_the_enabled_switch_parsed_one_way(tmp_path):
    from pathlib import Path

    from groundtrace.config import JudgeSettings, default_metrics

    s = Settings.from_env({"GROUNDTRACE_ENABLED": "off", "GROUNDTRACE_JUDGE_MODEL": "judge-m",
                           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "GROUNDTRACE_JSONL_PATH": "out.jsonl",
                           "XDG_CACHE_HOME": "/cache"})
    assert (s.enabled, s.switched_off, s.jsonl_path) == (False, True, "out.jsonl")
    assert s.judge == JudgeSettings(model="judge-m", base_url="http://127.0.0.1:9/v1", api_key=None,
                                    cache_dir=Path("/cache/groundtrace/judge"))
    assert s.metrics == list(default_metrics(s)) == ["grounding", "faithfulness"]
    unset, unknown = Settings.from_env({}), Settings.from_env({"GROUNDTRACE_ENABLED": "maybe"})
    assert (unset.enabled, unset.switched_off, unknown.enabled, unknown.switched_off) == (False, False, False, False)

    pytest.importorskip("openai")
    from groundtrace.backends.judge import JudgeClient

    client = JudgeClient(settings=s, cache_dir=tmp_path)
    assert (client.model, client.base_url, client.cache.path.parent) == ("judge-m", "http://127.0.0.1:9/v1", tmp_path)
    assert JudgeClient(model="other", settings=s, cache=False).model == "other"  # keywords win


def test_a_jsonl_sink_built_by_name_writes_where_the_settings_say(tmp_path):
    [sink] = build_sinks(["jsonl"], Settings(jsonl_path=str(tmp_path / "scores.jsonl")))
    assert sink.path == tmp_path / "scores.jsonl"
    sink.close()


def test_a_monitor_from_settings_takes_their_metrics_sinks_and_paths_and_its_keywords_win(tmp_path):
    from groundtrace.monitor import Monitor

    settings = Settings(metrics=["lexical"], sinks=["jsonl"], sample_rate=0.0, isolation="thread",
                        jsonl_path=str(tmp_path / "scores.jsonl"))
    monitor = Monitor.from_settings(settings, sample_rate=1.0)  # the settings alone would score nothing
    try:
        assert [m.name for m in monitor.metrics] == ["lexical"] and monitor.isolation == "thread"
        assert monitor.submit(Record(id="r1", question="Where?", contexts=["Paris is in France."],
                                     answer="Paris is in France."))
        assert monitor.flush(30)
    finally:
        monitor.close()
    [line] = (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["scores"][0]["metric"] == "lexical" and json.loads(line)["id"] == "r1"
