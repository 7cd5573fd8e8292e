"""The otel sink speaks the conventions: each Score a ``gen_ai.evaluation.result`` log record in the evaluated
span's context (a real SDK LoggerProvider and in-memory exporters), an EVALUATOR carrier span with exactly one
link to that span and OpenInference's ``evaluations.0.evaluation.*``; attributes at their types, none empty."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from groundtrace.record import Record  # noqa: E402
from groundtrace.score import Cost, Score, Span  # noqa: E402
from groundtrace.sinks.otel import OTelSink  # noqa: E402
from groundtrace.sinks.results import annotator_kind, error_type, genai_attributes  # noqa: E402

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def providers():
    spans, events = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(events))
    yield tracer_provider, logger_provider, spans, events
    tracer_provider.shutdown()
    logger_provider.shutdown()


def record(**fields) -> Record:
    return Record(id="r1", question="q", contexts=["c"], answer="a", trace_id=TRACE, span_id=SPAN, **fields)


GROUNDED = Score(metric="lexical", value=0.8, higher_is_better=True, hallucinated=False, threshold=0.4,
                 reason="4 of 5 keywords found", record_id="r1",
                 spans=[Span(start=0, end=5, text="Paris", label="unexpected word")])
JUDGED = Score(metric="faithfulness", value=0.5, higher_is_better=True, hallucinated=True, threshold=0.7,
               reason="", record_id="r1", details={"judge": {"model": "smollm2-135m"}},
               cost=Cost(input_tokens=420, output_tokens=37))
TIMED_OUT = Score(metric="faithfulness", value=None, higher_is_better=True, error="judge error (timeout): 30 s",
                  reason="judge error (timeout): 30 s", details={"judge": {"model": "m"}, "error_kind": "timeout"})


def test_each_score_is_a_log_record_in_the_evaluated_spans_context(providers) -> None:
    tracer_provider, logger_provider, spans, events = providers
    sink = OTelSink(tracer_provider=tracer_provider, logger_provider=logger_provider)
    sink.emit(record(metadata={"response_id": "chatcmpl-9xYz"}), [GROUNDED, JUDGED, TIMED_OUT])

    logs = [finished.log_record for finished in events.get_finished_logs()]
    assert [log.event_name for log in logs] == ["gen_ai.evaluation.result"] * 3
    assert {(format(log.trace_id, "032x"), format(log.span_id, "016x")) for log in logs} == {(TRACE, SPAN)}
    grounded, judged, timed_out = (dict(log.attributes) for log in logs)
    assert grounded == {"gen_ai.evaluation.name": "lexical", "gen_ai.evaluation.score.value": 0.8,
                        "gen_ai.evaluation.score.label": "grounded",
                        "gen_ai.evaluation.explanation": "4 of 5 keywords found",
                        "gen_ai.response.id": "chatcmpl-9xYz"}
    # no reason: no explanation at all, never an empty one
    assert judged == {"gen_ai.evaluation.name": "faithfulness", "gen_ai.evaluation.score.value": 0.5,
                      "gen_ai.evaluation.score.label": "hallucinated", "gen_ai.response.id": "chatcmpl-9xYz"}
    # a failed evaluation: no value, the label "error" and error.type naming the judge's failure
    assert timed_out == {"gen_ai.evaluation.name": "faithfulness", "gen_ai.evaluation.score.label": "error",
                         "gen_ai.evaluation.explanation": "judge error (timeout): 30 s",
                         "gen_ai.response.id": "chatcmpl-9xYz", "error.type": "judge_timeout"}


def test_each_carrier_span_has_one_link_to_the_evaluated_span_and_openinference_fields(providers) -> None:
    tracer_provider, logger_provider, spans, _ = providers
    OTelSink(tracer_provider=tracer_provider, logger_provider=logger_provider).emit(record(), [GROUNDED, JUDGED])

    carriers = {span.name: span for span in spans.get_finished_spans()}
    assert sorted(carriers) == ["groundtrace.faithfulness", "groundtrace.lexical"]
    for carrier in carriers.values():
        [link] = carrier.links
        assert (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) == (TRACE, SPAN)
        assert carrier.events == ()  # the event went to the logs
    lexical, judged = dict(carriers["groundtrace.lexical"].attributes), dict(carriers["groundtrace.faithfulness"].attributes)
    assert {key: value for key, value in lexical.items() if key.startswith("evaluations.")} == {
        "evaluations.0.evaluation.name": "lexical",
        "evaluations.0.evaluation.score": 0.8,
        "evaluations.0.evaluation.label": "grounded",
        "evaluations.0.evaluation.explanation": "4 of 5 keywords found",
        "evaluations.0.evaluation.annotator_kind": "CODE",
        "evaluations.0.evaluation.metadata": json.dumps(
            {"higher_is_better": True, "threshold": 0.4, "hallucinated": False,
             "unsupported_spans": [{"start": 0, "end": 5, "text": "Paris", "label": "unexpected word"}]}),
    }
    assert judged["evaluations.0.evaluation.annotator_kind"] == "LLM"
    assert json.loads(judged["evaluations.0.evaluation.metadata"])["judge_model"] == "smollm2-135m"
    assert "evaluations.0.evaluation.explanation" not in judged  # omitted, as the spec wants a missing field


def test_without_a_logger_provider_the_event_is_on_the_carrier_span(providers) -> None:
    tracer_provider, _, spans, events = providers
    OTelSink(tracer_provider=tracer_provider).emit(record(), [GROUNDED])  # the process has no LoggerProvider

    [carrier] = spans.get_finished_spans()
    [event] = carrier.events
    assert event.name == "gen_ai.evaluation.result"
    assert dict(event.attributes) == genai_attributes(GROUNDED)
    assert events.get_finished_logs() == ()


@pytest.mark.parametrize(("score", "expected"), [
    (GROUNDED, None),
    (TIMED_OUT, "judge_timeout"),
    (Score(metric="m", value=None, higher_is_better=True, error="KeyError: 'claims'"), "KeyError"),
    (Score(metric="m", value=None, higher_is_better=True, error="the record has no answer"), "_OTHER"),
])
def test_error_type_is_low_cardinality(score: Score, expected: str | None) -> None:
    assert error_type(score) == expected


def test_who_judged() -> None:
    assert (annotator_kind(GROUNDED), annotator_kind(JUDGED), annotator_kind(TIMED_OUT)) == ("CODE", "LLM", "LLM")
    # a combined score whose parts called a judge: its tokens say so
    combined = Score(metric="combined", value=0.6, higher_is_better=True, cost=Cost(input_tokens=10))
    assert annotator_kind(combined) == "LLM"
    # a metric without a threshold has no label to give
    assert "gen_ai.evaluation.score.label" not in genai_attributes(
        Score(metric="m", value=0.3, higher_is_better=True, reason="x"))
