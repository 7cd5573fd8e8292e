"""Phoenix sink: a real ``phoenix serve`` on loopback (a span sent over OTLP, annotated, read back),
and a loopback server for the exact wire payload, the retries and the failures."""

from __future__ import annotations

import re
import sys
import time

import pytest

pytest.importorskip("phoenix.client")

from groundtrace.errors import install_hint
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.sinks import sink_class  # noqa: E402
from groundtrace.score import Score  # noqa: E402
from groundtrace.sinks.phoenix import PhoenixSink  # noqa: E402

PROJECT = "groundtrace-sink-test"
API_KEY = "phx-test-secret-0123456789"
ACCEPTED = (200, {"data": [{"id": "U3BhbkFubm90YXRpb246MQ=="}]})
FACTS = {
    "span_id": "00f067aa0ba902b7",
    "name": "facts",
    "annotator_kind": "CODE",
    "identifier": "groundtrace",
    # the explanation in words: verdict, rounded value, threshold, direction, the phrase, then the reason
    "result": {"label": "grounded", "score": 0.75,
               "explanation": 'grounded: facts 0.75 (threshold 0.50; higher is better)\nUnsupported: "built in 1850"\n'
                              "3 of 4 claims supported"},
    "metadata": {
        "higher_is_better": True, "hallucinated": False, "threshold": 0.5, "record_id": "r1",
        "unsupported_spans": [{"start": 17, "end": 30, "text": "built in 1850", "label": "unsupported", "score": 0.9}],
    },
}
JUDGE = {
    "span_id": "00f067aa0ba902b7",
    "name": "judge",
    "annotator_kind": "CODE",
    "identifier": "groundtrace",
    "result": {"label": "error", "explanation": "timed out after 30 s"},
    "metadata": {"higher_is_better": True, "unsupported_spans": [], "record_id": "r1"},
}


# a judge metric's Score: an LLM judged it
JUDGED = {
    "span_id": "00f067aa0ba902b7",
    "name": "faithfulness",
    "annotator_kind": "LLM",
    "identifier": "groundtrace",
    "result": {"label": "hallucinated", "score": 0.5,
               "explanation": "hallucinated: faithfulness 0.50 (threshold 0.70; higher is better)\n"
                              "1 of 2 statements supported"},
    "metadata": {"higher_is_better": True, "hallucinated": True, "threshold": 0.7, "unsupported_spans": [],
                 "record_id": "r1"},
}


def sink_for(url: str, **options) -> PhoenixSink:
    return PhoenixSink(base_url=url, **options)


# ------------------------------------------------------------------------------ wire level
def annotating(server) -> list:
    """The annotation requests a server got (the annotation-config requests aside)."""
    return [r for r in server.requests if r.path == "/v1/span_annotations"]


def test_all_scores_go_in_one_synchronous_request(loopback, record, grounded, failed, judged) -> None:
    server = loopback(lambda request: ACCEPTED)
    sink_for(server.url).emit(record, [grounded, failed, judged])

    (request,) = annotating(server)
    assert (request.method, request.path, request.query) == ("POST", "/v1/span_annotations", {"sync": ["true"]})
    assert request.json == {"data": [FACTS, JUDGE, JUDGED]}  # annotator_kind LLM where a judge model scored


def test_settings_come_from_the_environment(loopback, monkeypatch, record, grounded) -> None:
    server = loopback(lambda request: ACCEPTED)
    for name in ("PHOENIX_ENDPOINT", "PHOENIX_BASE_URL", "PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_CLIENT_HEADERS",
                 "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", f"{server.url}/v1/traces")
    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)

    sink_class("phoenix")().emit(record, [grounded])

    (request,) = annotating(server)
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


def test_the_project_gets_a_config_per_metric_so_phoenix_colours_scores_good_or_bad(loopback, record, grounded,
                                                                                   failed, judged, caplog) -> None:
    """Once per metric with a threshold, after its first annotations: the config (created, or left as it is where
    one of that name exists: 409), then assigned to the project; a metric with no threshold (the error) gets none."""
    configs = iter([(200, {"data": {"id": "1"}}), (409, {"detail": "taken"})])

    def respond(request):
        return next(configs) if request.path == "/v1/annotation_configs" else ACCEPTED

    server = loopback(respond)
    sink = sink_for(server.url, project="rag app")
    sink.emit(record, [grounded, failed, judged])
    sink.emit(record, [grounded])  # the configs are made sure of once
    made = [(r.method, r.path, r.json if r.method == "POST" else None) for r in server.requests
            if r.path != "/v1/span_annotations"]
    assert made == [
        ("POST", "/v1/annotation_configs", {"type": "FREEFORM", "name": "facts", "optimization_direction": "MAXIMIZE",
                                            "threshold": 0.5, "lower_bound": 0.0, "upper_bound": 1.0,
                                            "description": "groundtrace's facts (higher is better; flagged past 0.5)"}),
        ("PUT", "/v1/projects/rag%20app/annotation_configs/facts", None),
        ("POST", "/v1/annotation_configs", {"type": "FREEFORM", "name": "faithfulness",
                                            "optimization_direction": "MAXIMIZE", "threshold": 0.7, "lower_bound": 0.0,
                                            "upper_bound": 1.0,
                                            "description": "groundtrace's faithfulness (higher is better; flagged "
                                                           "past 0.7)"}),
        ("PUT", "/v1/projects/rag%20app/annotation_configs/faithfulness", None)]
    assert len(annotating(server)) == 2 and "not set" not in caplog.text


def test_a_phoenix_that_refuses_the_config_keeps_the_annotations_and_says_so_once(loopback, record, caplog) -> None:
    server = loopback(lambda request: (403, {"detail": "viewer role"}) if "annotation_configs" in request.path
                      else ACCEPTED)
    sink = sink_for(server.url, project="rag")
    grounding = Score(metric="grounding", value=0.9, higher_is_better=False, hallucinated=True, threshold=0.51489)
    lexical = Score(metric="lexical", value=0.1, higher_is_better=True, hallucinated=True, threshold=0.4)
    with caplog.at_level("WARNING", logger="groundtrace.sinks.phoenix"):
        sink.emit(record, [grounding, lexical])
    assert len(annotating(server)) == 1  # delivered: only the colouring is missing
    assert server.requests[1].json["optimization_direction"] == "MINIMIZE"  # grounding: higher is worse
    [said] = [r.getMessage() for r in caplog.records if "annotation config" in r.getMessage()]
    assert said.startswith("groundtrace: Phoenix annotation config 'grounding' for project 'rag' not set (HTTPStatusError")


def test_the_project_comes_from_phoenix_own_variable(monkeypatch) -> None:
    from groundtrace.sinks.phoenix_configs import project_name

    monkeypatch.setenv("PHOENIX_PROJECT_NAME", "from-env")
    assert (project_name("given"), project_name(None)) == ("given", "from-env")
    monkeypatch.delenv("PHOENIX_PROJECT_NAME")
    assert project_name(None) == "default"  # no provider of the application's in this process


def test_a_span_not_yet_ingested_is_retried(loopback, record, grounded) -> None:
    replies = iter([(404, {"detail": "span not found"})] * 2)
    server = loopback(lambda request: next(replies, ACCEPTED))
    sink_for(server.url, backoff_s=0.01).emit(record, [grounded])
    assert [r.json for r in annotating(server)] == [{"data": [FACTS]}] * 3


def test_a_span_never_ingested_raises_after_bounded_attempts(loopback, record, grounded) -> None:
    server = loopback(lambda request: (404, {"detail": "span not found"}))
    with pytest.raises(RuntimeError, match="Phoenix has no span 00f067aa0ba902b7 after 3 attempts"):
        sink_for(server.url, max_attempts=3, backoff_s=0.01).emit(record, [grounded])
    assert len(server.requests) == 3


def test_a_rejected_request_is_not_retried(loopback, record, grounded) -> None:
    server = loopback(lambda request: (422, {"detail": "invalid annotation"}))
    with pytest.raises(RuntimeError, match="HTTP 422"):
        sink_for(server.url, backoff_s=0.01).emit(record, [grounded])
    assert len(server.requests) == 1


def test_a_record_without_span_id_is_skipped(loopback, record, grounded) -> None:
    server = loopback(lambda request: ACCEPTED)
    record.span_id = None
    sink_for(server.url).emit(record, [grounded])
    assert server.requests == []


def test_a_down_server_raises_quickly(refused_url, record, grounded) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Phoenix annotations of span 00f067aa0ba902b7 failed: ConnectError"):
        sink_for(refused_url, max_attempts=2, backoff_s=0.05).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # refused at once, no long backoff


def test_a_slow_server_times_out_within_the_bound(loopback, record, grounded) -> None:
    server = loopback(lambda request: (*ACCEPTED, 10))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="ReadTimeout"):
        sink_for(server.url, timeout_s=0.3, max_attempts=2, backoff_s=0.05).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # two 0.3 s timeouts, not the server's 10 s
    assert len(server.requests) == 2


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "phoenix.client", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("phoenix"))):
        PhoenixSink(base_url="http://127.0.0.1:9")


def test_each_annotation_names_the_conversation_in_its_metadata(loopback, record, grounded, failed) -> None:
    server = loopback(lambda request: ACCEPTED)
    record.session_id = "chat-42"
    sink_for(server.url).emit(record, [grounded, failed])

    (request,) = annotating(server)
    assert request.json == {"data": [{**FACTS, "metadata": {**FACTS["metadata"], "session_id": "chat-42"}},
                                      {**JUDGE, "metadata": {**JUDGE["metadata"], "session_id": "chat-42"}}]}


# ------------------------------------------------------------------------------ a live Phoenix
# phoenix_url: the session's `phoenix serve` (tests/conftest.py)
def export_span(url: str) -> tuple[str, str]:
    """One root span sent over OTLP/HTTP as an instrumented app would; its (trace id, span id)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10)))
    with provider.get_tracer("rag-app").start_as_current_span("rag.answer") as span:
        context = span.get_span_context()
    provider.shutdown()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def test_annotations_land_on_a_span_exported_to_a_live_phoenix(phoenix_url, record, grounded, failed,
                                                                judged) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from phoenix.client import Client

    record.trace_id, record.span_id = export_span(phoenix_url)
    record.session_id = "chat-42"
    # emitted at once: Phoenix answers 404 until it has ingested the span, and the sink retries
    sink_for(phoenix_url, backoff_s=0.25, max_attempts=8).emit(record, [grounded, failed, judged])

    found = Client(base_url=phoenix_url).spans.get_span_annotations(span_ids=[record.span_id], project_identifier=PROJECT)
    by_name = {a["name"]: {k: a[k] for k in ("span_id", "name", "annotator_kind", "identifier", "result", "metadata")}
               for a in found}
    expected_judge = {**JUDGE, "result": {**JUDGE["result"], "score": None}}
    # Phoenix keeps the conversation where the sink put it
    conversation = {"session_id": "chat-42"}
    assert by_name == {
        "facts": {**FACTS, "span_id": record.span_id, "metadata": {**FACTS["metadata"], **conversation}},
        "judge": {**expected_judge, "span_id": record.span_id, "metadata": {**JUDGE["metadata"], **conversation}},
        "faithfulness": {**JUDGED, "span_id": record.span_id, "metadata": {**JUDGED["metadata"], **conversation}}}

