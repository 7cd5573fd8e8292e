"""Issue 54, row 2: an answer with no letters ("45", "€45", "7:00", "1879") is a claim, read against the contexts,
never a confident 0.0 "no claims to check"."""

from __future__ import annotations

import pytest

from groundtrace.detector.claims import split_claims
from groundtrace.metrics import get_metric
from groundtrace.record import Record

CONTEXT = "Entry costs 12 euros. The museum opens at 9:00 and was founded in 1921."


@pytest.mark.parametrize("answer", ["45", "€45", "7:00", "1879"])
@pytest.mark.parametrize("metric", ["grounding", "grounding_xe", "combined"])
def test_a_lone_wrong_fact_is_read_and_flagged(answer, metric):
    score = get_metric(metric).score(Record(question="How much is entry and when does it open?", contexts=[CONTEXT],
                                            answer=answer))
    assert score.ok and score.hallucinated, (metric, answer, score.value, score.reason)
    assert "no claims to check" not in (score.reason or "")


@pytest.mark.parametrize("answer", ["12 euros", "9:00"])
def test_a_lone_right_fact_is_supported(answer):
    score = get_metric("grounding").score(Record(question="How much is entry and when does it open?",
                                                 contexts=[CONTEXT], answer=answer))
    assert score.ok and not score.hallucinated and score.details["claims"]


def test_list_markers_are_still_no_claims():
    assert [c.text for c in split_claims("1. The museum opens at 9.\n2. Entry is 12 euros.", "en")] == [
        "The museum opens at 9.", "Entry is 12 euros."]
    assert split_claims("1.", "en") == [] and split_claims("- ", "en") == []
    assert [c.text for c in split_claims("45", "en")] == ["45"]
