"""Every bad input ends as a defined Score or an error Score with a reason: no crash, no NaN."""

import math

import pytest

from groundtrace import Score, evaluate, get_metric

METRICS = ["lexical", "facts"]


def _valid(score: Score) -> None:
    assert score.value is None or (math.isfinite(score.value) and 0 <= score.value <= 1)
    assert (score.value is None) == (score.error is not None)
    assert score.reason


@pytest.mark.parametrize("name", METRICS)
def test_empty_and_blank_answers_are_errors_with_a_reason(name):
    for answer in ["", "   \n "]:
        score = get_metric(name).score({"contexts": ["Some context."], "answer": answer})
        _valid(score)
        assert score.value is None and "empty" in score.error


@pytest.mark.parametrize("name", METRICS)
def test_no_contexts_is_a_defined_score_saying_nothing_is_grounded(name):
    metric = get_metric(name)
    for contexts in [[], ["", "  "]]:
        score = metric.score({"contexts": contexts, "answer": "The fee is 100 rubles."})
        _valid(score)
        assert score.error is None
        assert score.hallucinated is True
        assert "no contexts" in score.reason


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("field", ["answer", "contexts"])
def test_missing_or_none_fields_name_the_field(name, field):
    record = {"contexts": ["c"], "answer": "a"}
    for broken in ({k: v for k, v in record.items() if k != field}, {**record, field: None}):
        score = get_metric(name).score(broken)
        _valid(score)
        assert f"'{field}'" in score.error


@pytest.mark.parametrize("name", METRICS)
def test_a_one_megabyte_answer_is_refused_with_the_limit_named(name):
    score = get_metric(name).score({"contexts": ["c"], "answer": "word " * 200_000})
    _valid(score)
    assert "1,000,000 characters" in score.error and "max_answer_chars" in score.error


def test_a_one_megabyte_answer_is_scored_when_the_limit_is_raised():
    score = get_metric("lexical", max_answer_chars=2_000_000).score(
        {"contexts": ["Students borrow books."], "answer": "Students borrow books. " * 45_000})
    _valid(score)
    assert score.error is None and score.details["J"] == 1.0


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize(
    "junk",
    [
        {"answer": 123, "contexts": ["c"]},
        {"answer": ["a", "list"], "contexts": ["c"]},
        {"answer": "a", "contexts": 42},
        {"answer": "a", "contexts": [1, 2]},
        {"answer": b"\x00\xff bytes", "contexts": ["c"]},
        "not a mapping",
        None,
        17,
    ],
)
def test_non_string_junk_is_an_error_score(name, junk):
    score = get_metric(name).score(junk)
    _valid(score)
    assert score.error.startswith("invalid record")


@pytest.mark.parametrize("name", METRICS)
def test_binary_junk_inside_strings_is_scored(name):
    junk = "".join(chr(c) for c in range(0, 600)) + "\ud800\udfff\x00" * 10
    score = get_metric(name).score({"contexts": [junk, "The fee is 100 rubles."], "answer": "Fee 100 rubles." + junk})
    _valid(score)
    assert score.error is None


def test_evaluate_keeps_going_and_records_every_failure():
    rows = evaluate(
        [{"id": "ok", "contexts": ["The fee is 100 rubles."], "answer": "The fee is 100 rubles."},
         {"id": "bad", "answer": 5},
         {"id": "empty", "contexts": ["x"], "answer": ""}],
        metrics=METRICS,
    )
    assert [r.id for r in rows] == ["ok", "bad", "empty"]
    assert all(s.ok for s in rows[0].scores)
    assert all(s.error and s.record_id == "bad" for s in rows[1].scores)
    assert all(s.error and "empty" in s.error for s in rows[2].scores)


def test_a_metric_that_raises_becomes_an_error_score():
    from groundtrace.metrics.base import Metric

    class Broken(Metric):
        name = "broken"
        higher_is_better = True
        default_threshold = 0.5

        def compute(self, record, language):
            raise RuntimeError("backend exploded")

    class NaNMetric(Broken):
        name = "nan"

        def compute(self, record, language):
            from groundtrace.metrics import Result

            return Result(value=float("nan"), reason="oops")

    for metric, message in [(Broken(), "RuntimeError: backend exploded"), (NaNMetric(), "invalid value")]:
        score = metric.score({"contexts": ["c"], "answer": "a"})
        _valid(score)
        assert message in score.error


def test_thresholds_outside_the_unit_interval_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        get_metric("lexical", threshold=1.5)
    with pytest.raises(ValueError, match="mode"):
        get_metric("facts", mode="strict")
