"""What the Monitor records, read back through the SDK's in-memory reader: values, attributes, exemplars,
every series from the start, the Monitor's own counts matched exactly, in thread and process isolation."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundtrace.metrics.base import Metric, Result
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.score import Cost
from groundtrace.telemetry.evaluations import Evaluations
from groundtrace.telemetry.evaluations import Result as EvaluatedResult
from groundtrace.telemetry.instruments import (COST, CPU, DURATION, DURATION_BUCKETS, EVALUATIONS, HEALTH_COUNTERS,
                                               LAST_PROGRESS, QUEUED, SCORE, SCORE_BUCKETS, TOKEN_BUCKETS, TOKENS,
                                               WORKERS)
from tests.telemetry.conftest import FLAGGED, GROUNDED, SPAN_ID, TRACE_ID, Readings

HEALTH = [f"groundtrace.monitor.{field}" for field, _ in HEALTH_COUNTERS]


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_scores_and_counts_match_the_monitors_own(in_tmp, reader: InMemoryMetricReader, isolation: str) -> None:
    started = time.time()
    with Monitor(["lexical"], "none", telemetry=reader.provider, isolation=isolation) as monitor:
        for record in (FLAGGED, GROUNDED, GROUNDED.model_copy(update={"id": "en-2"})):
            monitor.submit(record)
        monitor.submit(Record(id="no-contexts", question="Why?", answer="Because."))  # lexical cannot score it
        assert monitor.flush(60)
        stats = monitor.stats
        flagged_by = dict(monitor._flagged_by)
        seen = Readings(reader)
    assert (stats.submitted, stats.scored, stats.failed, stats.flagged) == (4, 3, 1, 1)

    outcomes = {p.attributes["groundtrace.outcome"]: p.value for p in seen.named(EVALUATIONS)}
    assert outcomes == {"flagged": flagged_by["lexical"], "passed": 2, "error": 1}
    for point in seen.named(EVALUATIONS):  # the service is the resource's, never a point's attribute
        assert point.attributes == {"gen_ai.evaluation.name": "lexical", "groundtrace.outcome": point.attributes[
            "groundtrace.outcome"]}
    assert [resource["service.name"] for resource in seen.resources] == ["rag-staging"]
    for field, _ in HEALTH_COUNTERS:
        assert seen.one(f"groundtrace.monitor.{field}").value == getattr(stats, field), field

    # the histogram: one point per verdict and language, values as the metric computed them, [0, 1] buckets
    hallucinated = seen.one(SCORE, gen_ai__evaluation__score__label="hallucinated").data
    grounded = seen.one(SCORE, gen_ai__evaluation__score__label="grounded")
    assert grounded.attributes == {"gen_ai.evaluation.name": "lexical", "gen_ai.evaluation.score.label": "grounded",
                                   "groundtrace.language": "en"}
    assert seen.one(SCORE, gen_ai__evaluation__score__label="hallucinated").attributes["groundtrace.language"] == "ru"
    assert (hallucinated.count, grounded.data.count) == (1, 2)
    assert hallucinated.sum == pytest.approx(0.1444162188484974)  # the value the otel sink's page shows
    assert tuple(hallucinated.explicit_bounds) == SCORE_BUCKETS
    assert hallucinated.bucket_counts[SCORE_BUCKETS.index(0.2)] == 1  # 0.144 lies in (0.1, 0.2]

    # the flagged answer's measurement leads to its request's trace; a grounded one's keeps no exemplar
    [exemplar] = hallucinated.exemplars
    assert (format(exemplar.trace_id, "032x"), format(exemplar.span_id, "016x")) == (TRACE_ID, SPAN_ID)
    assert exemplar.value == pytest.approx(0.1444162188484974)
    assert grounded.data.exemplars == []

    # latency: a seconds histogram, one measurement per settled record (the failed one too)
    duration = seen.one(DURATION)
    assert duration.attributes == {} and duration.data.count == 4 and tuple(duration.data.explicit_bounds) == DURATION_BUCKETS
    assert 0 < duration.data.sum < 60 and seen.one(CPU).value > 0
    assert started <= seen.one(LAST_PROGRESS).value <= time.time()  # Unix seconds of the last record settled
    assert seen.one(QUEUED).value == 0
    assert seen.one(WORKERS).value == 1 and Readings(reader).one(WORKERS).value == 0  # running, then closed


def test_every_series_is_there_from_the_start_with_zeros(in_tmp, reader: InMemoryMetricReader) -> None:
    with Monitor(["lexical", "facts"], "none", telemetry=reader.provider, isolation="thread") as monitor:
        seen = Readings(reader)
        assert monitor.workers_alive == 1
    counters = [*HEALTH, CPU]
    assert {name: seen.one(name).value for name in counters} == dict.fromkeys(counters, 0)
    assert {(p.attributes["gen_ai.evaluation.name"], p.attributes["groundtrace.outcome"]): p.value
            for p in seen.named(EVALUATIONS)} == {(m, o): 0 for m in ("lexical", "facts")
                                                    for o in ("flagged", "passed", "error")}
    assert {p.attributes["gen_ai.evaluation.name"]: p.value for p in seen.named(COST)} == {"lexical": 0, "facts": 0}
    assert seen.one(WORKERS).value == 1 and seen.one(QUEUED).value == 0
    assert seen.one(LAST_PROGRESS).value > 0  # the Monitor's start, until a worker takes a record
    # a histogram has points once there are values: no made-up latency, score or token count
    assert seen.named(DURATION) == seen.named(SCORE) == seen.named(TOKENS) == []


class Judged(Metric):
    """A metric that reports what a judge spent and which model it asked, as the judge metrics do."""

    name = "judged"
    higher_is_better = True
    default_threshold = 0.5

    def compute(self, record, language):
        return Result(0.9, "supported", details={"judge": {"model": "gpt-4o-mini", "requests": 1}},
                      cost=Cost(input_tokens=120, output_tokens=30, usd=0.0004))


def test_judge_tokens_go_to_upstreams_token_usage_histogram(in_tmp, reader: InMemoryMetricReader) -> None:
    with Monitor([Judged(), "lexical"], "none", telemetry=reader.provider, isolation="thread") as monitor:
        for _ in range(3):
            monitor.submit(GROUNDED)
        monitor.flush(60)
        seen = Readings(reader)
    # gen_ai.client.token.usage as the GenAI conventions define it, plus the evaluation it was spent on
    for kind, per_record in (("input", 120), ("output", 30)):
        point = seen.one(TOKENS, gen_ai__token__type=kind)
        assert point.attributes == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                    "gen_ai.token.type": kind, "gen_ai.request.model": "gpt-4o-mini",
                                    "gen_ai.evaluation.name": "judged"}
        assert (point.data.count, point.data.sum) == (3, 3 * per_record)
        assert tuple(point.data.explicit_bounds) == TOKEN_BUCKETS
        assert (point.data.min, point.data.max) == (per_record, per_record)
    assert seen.metric(TOKENS).unit == "{token}"
    # lexical asked no judge: no token point of its own; its spend counter reads 0 from the start
    assert {p.attributes["gen_ai.evaluation.name"] for p in seen.named(TOKENS)} == {"judged"}
    assert seen.one(COST, gen_ai__evaluation__name="judged").value == pytest.approx(0.0012)
    assert seen.one(COST, gen_ai__evaluation__name="lexical").value == 0


def test_the_judges_model_crosses_the_scoring_process_pipe() -> None:
    """What the scoring process sends back per record: the model too, whole, or empty when there was none."""
    sent = Evaluations("en", [EvaluatedResult(0.9, False, 120, 30, 0.0004, "gpt-4o-mini"), EvaluatedResult(None),
                              EvaluatedResult(0.2, True, 5, 1, 0.0, "org/model,v2;q4")])
    token = sent.encode()
    assert b" " not in token
    back = Evaluations.decode(token)
    assert [r.model for r in back.results] == ["gpt-4o-mini", None, "org/model_v2_q4"]  # , and ; would split it
    assert back.results[0] == sent.results[0] and back.results[1] == sent.results[1]


class Hangs(Metric):
    name = "hangs"
    higher_is_better = True
    default_threshold = 0.5

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def compute(self, record, language):
        self.release.wait(30)
        return Result(0.5, "late")


def test_a_stuck_evaluator_shows_at_the_next_collection(in_tmp, reader: InMemoryMetricReader) -> None:
    release = threading.Event()
    monitor = Monitor([Hangs(release)], "none", telemetry=reader.provider, metric_timeout_s=60)
    try:
        monitor.submit(GROUNDED)
        time.sleep(0.5)
        seen = Readings(reader)
        # the last progress (the worker taking the record) stays in the past while it waits
        assert seen.one(QUEUED).value == 1 and time.time() - seen.one(LAST_PROGRESS).value >= 0.4
        assert seen.one(WORKERS).value == 1
        stuck_since = seen.one(LAST_PROGRESS).value
        time.sleep(0.2)
        assert Readings(reader).one(LAST_PROGRESS).value == stuck_since  # a timestamp: it does not move by itself
    finally:
        release.set()
        monitor.close()
    seen = Readings(reader)
    assert seen.one(QUEUED).value == 0 and seen.one(WORKERS).value == 0
    assert seen.one(LAST_PROGRESS).value > stuck_since  # the record settled
    assert seen.one("groundtrace.monitor.scored").value == 1


def test_attributes_stay_bounded_whatever_the_traffic(in_tmp, reader: InMemoryMetricReader) -> None:
    codes = [f"{a}{b}" for a in "abcdefg" for b in "xyz"]  # 21 languages, more than the bound of 16
    with Monitor(["lexical"], "none", telemetry=reader.provider, isolation="thread", queue_size=500) as monitor:
        for i in range(200):
            monitor.submit(GROUNDED.model_copy(update={
                "id": f"req-{i}", "question": f"question number {i}?", "trace_id": f"{i:032x}",
                "language": codes[i % len(codes)] if i % 10 else "not a code"}))
        monitor.flush(60)
        seen = Readings(reader)
    languages = {p.attributes["groundtrace.language"] for p in seen.named(SCORE)}
    assert len(languages) == 16 + 1 and "other" in languages  # 16 codes, then other (a malformed one too)
    values = {str(v) for p in seen.points for v in p.attributes.values()}
    assert not any("req-" in v or "question" in v or f"{7:032x}" in v for v in values)
    assert len(seen.points) < 60  # 200 records: the series are set by the configuration, not the traffic


def test_several_monitors_on_one_provider_add_up(in_tmp, reader: InMemoryMetricReader) -> None:
    first = Monitor(["lexical"], "none", telemetry=reader.provider, isolation="thread")
    second = Monitor(["lexical"], "none", telemetry=reader.provider, isolation="thread")
    for monitor in (first, second):
        monitor.submit(FLAGGED)
        monitor.flush(30)
    first.close()
    del first  # its counts stay: a counter never goes back down
    seen = Readings(reader)
    second.close()
    assert seen.one(EVALUATIONS, groundtrace__outcome="flagged").value == 2
    assert seen.one("groundtrace.monitor.submitted").value == 2
    assert seen.one(WORKERS).value == 1  # the second still runs
