"""Guard mode for plain code (groundtrace.guard, issue 55 items 1-4 for code with no framework): every policy on a
planted and a faithful answer with the real grounding detector, streams checked chunk by chunk, the time budget
and a failing detector."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import groundtrace
from groundtrace.guards import FALLBACK, Decision, GuardBlocked
from groundtrace.metrics.base import Metric, Result

CONTEXTS = ["The Larkfield museum opened in 1978. Entry costs 12 euros. It closes at 6 pm."]
QUESTION = "Tell me about the Larkfield museum."
FAITHFUL = "The Larkfield museum opened in 1978. It closes at 6 pm."
PLANTED = "The Larkfield museum opened in 1978. Entry costs 15 euros. It closes at 6 pm."
WRONG = "15 euros"


class Slow(Metric):
    """A metric slower than any budget here (a judge on a busy server)."""

    name, requires, higher_is_better, default_threshold = "slow", ("answer",), False, 0.5

    def __init__(self, seconds: float = 0.5, **options) -> None:
        super().__init__(**options)
        self.seconds = seconds

    def compute(self, record, language):
        time.sleep(self.seconds)
        return Result(0.0, "slow but fine")


class Broken(Metric):
    name, requires, higher_is_better, default_threshold = "broken", ("answer",), False, 0.5

    def compute(self, record, language):
        raise RuntimeError("the detector's model file is gone")


@pytest.fixture(scope="module")
def grounding():
    return groundtrace.get_metric("grounding")


def test_a_faithful_answer_passes_under_every_policy(grounding):
    for policy in ("flag", "redact", "replace", "raise"):
        decision = groundtrace.guard([grounding], policy=policy).check(QUESTION, CONTEXTS, FAITHFUL)
        assert (decision.action, decision.hallucinated, decision.text) == ("passed", False, FAITHFUL), policy
        assert not decision.blocked and decision.scores[0].metric == "grounding"


def test_flag_delivers_the_answer_with_the_verdict_and_the_wrong_fact(grounding):
    decision = groundtrace.guard([grounding]).check(QUESTION, CONTEXTS, PLANTED)
    assert (decision.action, decision.hallucinated, decision.text) == ("flagged", True, PLANTED)
    assert any(WRONG in span.text for span in decision.spans)
    assert "the contexts say 12 euros; the answer says 15 euros" in decision.reason
    assert decision.seconds > 0 and decision.scores[0].hallucinated


def test_redact_drops_the_unsupported_sentence_and_delivers_the_rest(grounding):
    decision = groundtrace.guard([grounding], policy="redact").check(QUESTION, CONTEXTS, PLANTED)
    assert (decision.action, decision.text) == ("redacted", FAITHFUL)
    assert decision.answer == PLANTED and decision.blocked


def test_replace_delivers_the_fallback_in_the_answers_language(grounding):
    decision = groundtrace.guard([grounding], policy="replace").check(QUESTION, CONTEXTS, PLANTED)
    assert (decision.action, decision.text) == ("replaced", FALLBACK["en"])
    russian = groundtrace.guard([grounding], policy="replace", fallback={"ru": "Уточните в деканате."}).check(
        "Сколько стоит общежитие?", ["Проживание в общежитии стоит 1 450 рублей в месяц."],
        "Проживание в общежитии стоит 2 450 рублей в месяц.")
    assert (russian.action, russian.text) == ("replaced", "Уточните в деканате.")


def test_raise_raises_the_documented_exception_carrying_the_decision(grounding):
    with pytest.raises(GuardBlocked) as raised:
        groundtrace.guard([grounding], policy="raise").check(QUESTION, CONTEXTS, PLANTED)
    decision = raised.value.decision
    assert isinstance(raised.value, groundtrace.GroundtraceError)
    assert (decision.action, decision.hallucinated) == ("raised", True) and "15 euros" in str(raised.value)


def test_reask_names_the_unsupported_phrases_checks_the_new_answer_and_falls_back_when_it_is_still_wrong(grounding):
    asked = []

    def fixed(question, contexts, answer, phrases):
        asked.append((question, contexts, answer, phrases))
        return "Entry costs 12 euros."

    decision = groundtrace.guard([grounding], policy="reask", reask=fixed).check(QUESTION, CONTEXTS, PLANTED)
    assert (decision.action, decision.hallucinated, decision.text) == ("reasked", False, "Entry costs 12 euros.")
    assert asked[0][:3] == (QUESTION, CONTEXTS, PLANTED) and any(WRONG in p for p in asked[0][3])
    still = groundtrace.guard([grounding], policy="reask", reask=lambda *a: "Entry costs 19 euros.").check(
        QUESTION, CONTEXTS, PLANTED)
    assert (still.action, still.text) == ("replaced", FALLBACK["en"]) and "asked again" in still.reason

    def down(*args):
        raise ConnectionError("the model is down")

    failed = groundtrace.guard([grounding], policy="reask", reask=down).check(QUESTION, CONTEXTS, PLANTED)
    assert (failed.action, failed.text) == ("replaced", FALLBACK["en"])


CHUNKS = ["The Larkfield ", "museum opened in 1978. Entry ", "costs 15 eu", "ros. It closes ", "at 6 pm."]


@pytest.mark.parametrize("policy, delivered, action", [
    ("redact", "The Larkfield museum opened in 1978. It closes at 6 pm.", "redacted"),
    ("replace", "The Larkfield museum opened in 1978. " + FALLBACK["en"], "replaced"),
    ("reask", "The Larkfield museum opened in 1978. " + FALLBACK["en"], "replaced"),
])
def test_a_stream_sends_no_unsupported_sentence_and_holds_back_at_most_one(grounding, policy, delivered, action):
    closed = threading.Event()

    def model():
        try:
            yield from CHUNKS
        finally:
            closed.set()

    guard = groundtrace.guard([grounding], policy=policy, reask=(lambda *a: "") if policy == "reask" else None)
    stream = guard.stream(QUESTION, CONTEXTS, model())
    pieces = []
    for piece in stream:
        assert WRONG not in "".join(pieces + [piece]), pieces  # checked piece by piece, as the caller receives them
        pieces.append(piece)
    assert "".join(pieces) == delivered
    assert stream.decision.action == action and stream.decision.hallucinated is True
    assert any(WRONG in PLANTED[s.start:s.end] for s in stream.decision.spans)  # offsets into the whole answer
    # never more than one sentence and the start of the next were held
    assert stream.held_back <= len("The Larkfield museum opened in 1978. Entry ")
    if action == "replaced":
        assert closed.is_set()  # the model's stream was closed, not read to its end


def test_flag_streams_untouched_and_attaches_the_decision_at_the_end(grounding):
    stream = groundtrace.guard([grounding]).stream(QUESTION, CONTEXTS, iter(CHUNKS))
    assert list(stream) == CHUNKS
    assert stream.decision.action == "flagged" and stream.decision.text == PLANTED


def test_async_check_and_stream(grounding):
    guard = groundtrace.guard([grounding], policy="redact")

    async def model():
        for chunk in CHUNKS:
            await asyncio.sleep(0)
            yield chunk

    async def run():
        decision = await guard.acheck(QUESTION, CONTEXTS, PLANTED)
        stream = guard.astream(QUESTION, CONTEXTS, model())
        pieces = [piece async for piece in stream]
        return decision, pieces, stream.decision

    decision, pieces, streamed = asyncio.run(run())
    assert decision.text == FAITHFUL and "".join(pieces) == FAITHFUL and streamed.action == "redacted"


def test_a_check_over_its_budget_is_delivered_as_on_timeout_says_counted_and_finished_in_the_background():
    arrived = []
    done = threading.Event()

    def on_score(record, scores):
        arrived.append((record.answer, scores))
        done.set()

    passing = groundtrace.guard([Slow()], budget_ms=1, on_score=on_score)
    decision = passing.check(QUESTION, CONTEXTS, FAITHFUL)
    assert (decision.action, decision.hallucinated, decision.text) == ("unchecked", None, FAITHFUL)
    assert "not checked within the budget" in decision.reason
    assert passing.stats == {"timed_out": 1, "checked": 1, "unchecked": 1}
    assert done.wait(10) and arrived[0][0] == FAITHFUL and arrived[0][1][0].value == 0.0  # staging still gets it
    falling = groundtrace.guard([Slow()], budget_ms=1, on_timeout="fallback").check(QUESTION, CONTEXTS, FAITHFUL)
    assert (falling.action, falling.text) == ("replaced", FALLBACK["en"])


def test_a_detector_that_fails_never_raises_into_the_app_not_even_under_raise():
    for policy in ("flag", "raise", "replace"):
        decision = groundtrace.guard([Broken()], policy=policy).check(QUESTION, CONTEXTS, PLANTED)
        assert decision.action == "unchecked" and decision.hallucinated is None and decision.text == PLANTED
        assert "the check failed: broken: RuntimeError: the detector's model file is gone" in decision.reason


def test_bad_arguments_are_said():
    with pytest.raises(ValueError, match="policy must be one of"):
        groundtrace.guard(["lexical"], policy="block")
    with pytest.raises(ValueError, match="reask policy needs reask="):
        groundtrace.guard(["lexical"], policy="reask")
    with pytest.raises(ValueError, match="budget_ms must be above 0"):
        groundtrace.guard(["lexical"], budget_ms=0)
    with pytest.raises(TypeError, match="contexts must be a list of strings"):
        groundtrace.guard(["lexical"]).check(QUESTION, "one passage as a string", FAITHFUL)
    assert isinstance(groundtrace.guard(["lexical"]).check(QUESTION, CONTEXTS, FAITHFUL), Decision)


def test_the_default_is_grounding_or_the_verdict_file(monkeypatch, tmp_path):
    monkeypatch.delenv("GROUNDTRACE_VERDICT_FILE", raising=False)
    assert [m.name for m in groundtrace.guard().metrics] == ["grounding"]
    from groundtrace.metrics.combined import DEFAULT_FILE

    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(DEFAULT_FILE))
    assert [m.name for m in groundtrace.guard().metrics] == ["combined"]


def test_each_decision_goes_on_the_current_span_and_into_the_monitors_metrics(grounding):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from groundtrace.monitor import Monitor

    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    arrived = []
    monitor = Monitor([grounding], [], isolation="thread", telemetry=MeterProvider(metric_readers=[reader]),
                      flush_at_exit=False)
    try:
        guard = groundtrace.guard(policy="redact", monitor=monitor, on_score=lambda r, s: arrived.append(r))
        with tracer_provider.get_tracer("app").start_as_current_span("request") as span:
            decision = guard.check(QUESTION, CONTEXTS, PLANTED)
            asyncio.run(guard.acheck(QUESTION, CONTEXTS, FAITHFUL))  # off the loop, in the request's context
            ids = format(span.get_span_context().trace_id, "032x")
        assert decision.action == "redacted"
        [ended] = exporter.get_finished_spans()
        assert ended.attributes["groundtrace.guard.action"] == "passed"  # the last decision's (one span here)
        assert ended.attributes["groundtrace.guard.hallucinated"] is False
        assert {record.trace_id for record in arrived} == {ids}  # the Scores link to the request's trace
        assert monitor.flush(30) and monitor.stats.scored == 2 and monitor.stats.flagged == 1
        points = [(metric.name, dict(point.attributes), point)
                  for resource in reader.get_metrics_data().resource_metrics for scope in resource.scope_metrics
                  for metric in scope.metrics for point in metric.data.data_points]
        counted = {p[1]["groundtrace.guard.action"]: p[2].value for p in points
                   if p[0] == "groundtrace.guard.decisions"}
        assert counted == {"redacted": 1, "passed": 1}
        waited = [p[2] for p in points if p[0] == "groundtrace.guard.duration"]
        assert sum(point.count for point in waited) == 2
    finally:
        monitor.close()


def test_a_guard_reads_on_the_processs_cores_and_its_values_do_not_change_with_them():
    import os

    cores = max(1, min(4, len(os.sched_getaffinity(0))))
    guard = groundtrace.guard(["grounding", "lexical"])
    assert guard.metrics[0]._threads == cores  # grounding takes threads; lexical is built as it is
    one = groundtrace.guard(["grounding"], threads=1).check(QUESTION, CONTEXTS, PLANTED).scores[0]
    many = groundtrace.guard(["grounding"], threads=2).check(QUESTION, CONTEXTS, PLANTED).scores[0]
    tolerance = type(guard.metrics[0]).numerics()[0]  # the stated CPU tolerance of grounding's values
    assert many.value == pytest.approx(one.value, abs=tolerance) and many.hallucinated is one.hallucinated is True
