"""Fuzzed: every offline metric (lexical, facts, grounding) on arbitrary inputs. One Score per input,
never an exception; an error Score has a reason; a value lies in [0, 1]; every span lies inside the
answer and its text is the answer's slice. A well-formed record fails only for a documented reason."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundtrace.scoring.engine import Evaluator
from groundtrace.metrics import Metric, get_metric
from groundtrace.record import InvalidRecord, coerce_record
from groundtrace.score import Score
from tests.fuzz.strategies import inputs, ordinary_text, well_formed_records

# what a record of strings may fail for, by design (test_bad_inputs.py): nothing else
DOCUMENTED = ("the answer is empty", "more than this metric's limit", "no 'answer'", "no 'contexts'")


@cache
def metric(name: str) -> Metric:
    return get_metric(name)


def check(name: str, item: Any, score: Score) -> None:
    assert isinstance(score, Score) and score.metric == name
    if not score.ok:
        assert score.value is None and score.error and score.reason, score
        return
    assert 0.0 <= score.value <= 1.0
    try:
        answer = coerce_record(item).answer or ""
    except InvalidRecord:
        pytest.fail(f"{name} scored an input that is no record: {item!r}")
    for span in score.spans:
        assert 0 <= span.start <= span.end <= len(answer), (span, len(answer))
        assert answer[span.start:span.end] == span.text, (span, answer)


def check_well_formed(name: str, item: dict[str, Any]) -> None:
    score = metric(name).score(item)
    check(name, item, score)
    if not score.ok:
        assert any(reason in score.error for reason in DOCUMENTED), score.error


@pytest.mark.parametrize("name", ["lexical", "facts"])
@settings(max_examples=100)
@given(item=inputs)
def test_any_input_gives_one_well_formed_score(name: str, item: Any) -> None:
    check(name, item, metric(name).score(item))


@pytest.mark.parametrize("name", ["lexical", "facts"])
@settings(max_examples=60)
@given(item=well_formed_records)
def test_a_record_of_strings_fails_only_for_a_documented_reason(name: str, item: dict[str, Any]) -> None:
    check_well_formed(name, item)


# the detector is a transformer on the CPU (~0.15 s a record): fewer examples, and no huge contexts
grounding_records = st.fixed_dictionaries({"question": ordinary_text, "contexts": st.lists(ordinary_text, min_size=1, max_size=3),
                                           "answer": ordinary_text}, optional={"language": st.sampled_from(["en", "ru", "zh"])})


@settings(max_examples=25)
@given(item=st.one_of(grounding_records, inputs.filter(lambda i: not isinstance(i, dict) or len(str(i)) < 5_000)))
def test_grounding_on_any_input(item: Any) -> None:
    check("grounding", item, metric("grounding").score(item))


@settings(max_examples=25)
@given(item=grounding_records)
def test_grounding_fails_a_record_of_strings_only_for_a_documented_reason(item: dict[str, Any]) -> None:
    check_well_formed("grounding", item)


@settings(max_examples=40)
@given(items=st.lists(inputs, max_size=6), workers=st.sampled_from([1, 3]))
def test_the_evaluator_gives_one_row_per_input_in_order(items: list[Any], workers: int) -> None:
    rows = Evaluator(["lexical"], workers=workers).evaluate(items)
    assert len(rows) == len(items)
    for item, row in zip(items, rows, strict=True):
        assert len(row.scores) == 1
        check("lexical", item, row.scores[0])
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            assert row.id == item["id"]
