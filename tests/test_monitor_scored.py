"""Monitor.submit_scored: a record a guard already scored on the request's path reaches every sink with those
Scores, masked as any record is, counted as the Monitor's own, and no metric runs on it again (issue 55, item 5)."""

from __future__ import annotations

import json

import groundtrace
from groundtrace import Record
from groundtrace.monitor import Monitor
from groundtrace.metrics.base import Metric
from tests.custom_sinks import PlainSink

ANSWER = "The fee is 150 roubles for anna@example.com."
CONTEXTS = ["The fee is 100 roubles."]


class NeverRuns(Metric):
    """Named as the guard's metric; a Monitor that scored a submitted-scored record again would say so."""

    name, requires, higher_is_better, default_threshold = "lexical", ("answer",), True, 0.5

    def compute(self, record, language):
        raise AssertionError("the Monitor scored a record the guard had scored")


def record(**fields) -> Record:
    given = {"id": "r1", "trace_id": f"{1:032x}", "question": "What is the fee?", "contexts": CONTEXTS,
             "answer": ANSWER, "metadata": {"guard": {"action": "redacted"}}}
    return Record(**(given | fields))


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def guard_scores() -> list:
    return [groundtrace.get_metric("lexical").score(record())]


def test_every_sink_gets_the_guards_scores_in_a_scoring_process_monitor_too(tmp_path):
    scores = guard_scores()
    out, mine = tmp_path / "scores.jsonl", PlainSink()
    # the default isolation, "process": jsonl is a sink the scoring process feeds, yet this record never goes there
    with Monitor(["lexical"], [mine, f"jsonl:{out}"], flush_at_exit=False) as monitor:
        assert monitor.isolation == "process"
        assert monitor.submit_scored(record(), scores)
        assert monitor.flush(60)
        stats = monitor.stats
    [(got, delivered)] = mine.got
    assert got.answer == ANSWER and got.metadata["guard"] == {"action": "redacted"}
    assert [s.model_dump() for s in delivered] == [s.model_dump() for s in scores]
    [row] = lines(out)
    assert row["record"]["metadata"]["guard"]["action"] == "redacted"
    assert row["scores"][0]["value"] == scores[0].value and row["scores"][0]["reason"] == scores[0].reason
    assert (stats.submitted, stats.scored, stats.failed) == (1, 1, 0)
    assert stats.flagged == int(bool(scores[0].hallucinated))


def test_no_metric_runs_again_and_a_metric_the_guard_did_not_score_is_an_error_score():
    mine = PlainSink()
    with Monitor([NeverRuns()], [mine], isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit_scored(record(), guard_scores())
        monitor.submit_scored(record(id="r2"), [])
        assert monitor.flush(30)
        stats = monitor.stats
    first, second = (scores for _, scores in sorted(mine.got, key=lambda got: got[0].id))
    assert first[0].ok and first[0].metric == "lexical"
    assert second[0].error == "the guard did not score this metric"
    assert (stats.scored, stats.failed) == (1, 1)


def test_a_mask_applies_and_the_guards_scores_lose_their_text_since_they_quote_the_unmasked_answer():
    mine = PlainSink()
    with Monitor(["lexical"], [mine], mask=lambda text: text.replace("anna@example.com", "<email>"),
                 flush_at_exit=False) as monitor:
        monitor.submit_scored(record(), guard_scores())
        assert monitor.flush(30)
    [(got, [score])] = mine.got
    assert got.answer == "The fee is 150 roubles for <email>."
    assert score.reason == "" and all(span.text == "" for span in score.spans)
    assert score.value == guard_scores()[0].value  # the value and the verdict stay


def test_capture_text_off_delivers_no_text():
    mine = PlainSink()
    with Monitor(["lexical"], [mine], capture_text=False, flush_at_exit=False) as monitor:
        monitor.submit_scored(record(), guard_scores())
        assert monitor.flush(30)
    [(got, [score])] = mine.got
    assert (got.question, got.answer, got.contexts) == (None, None, None) and got.trace_id == f"{1:032x}"
    assert score.reason == ""


def test_sampling_and_exclusion_hold_for_scored_records():
    mine = PlainSink()
    with Monitor(["lexical"], [mine], sample_rate=0.0, flush_at_exit=False) as monitor:
        assert not monitor.submit_scored(record(), guard_scores())
        assert monitor.stats.sampled_out == 1
    with Monitor(["lexical"], [mine], flush_at_exit=False) as monitor:
        assert not monitor.submit_scored(record().model_copy(update={"metadata": {"groundtrace_exclude": True}}),
                                         guard_scores())
        assert monitor.stats.excluded == 1
    assert mine.got == []

