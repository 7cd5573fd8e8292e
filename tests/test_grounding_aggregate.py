"""From token probabilities to claims and an answer (groundtrace.detector.aggregate), and the metric
reading the aggregation its model card names."""

from __future__ import annotations

import numpy as np
import pytest

from groundtrace import Record
from groundtrace.detector.aggregate import answer_probability, claim_probabilities, claim_probability
from groundtrace.metrics import get_metric
from groundtrace.metrics import grounding as grounding_module


def test_a_claim_is_the_mean_of_its_three_strongest_tokens():
    assert claim_probability(np.array([0.1, 0.9, 0.5, 0.7])) == pytest.approx((0.9 + 0.7 + 0.5) / 3)
    assert claim_probability(np.array([0.4, 0.2])) == pytest.approx(0.3)  # fewer than three: all of them
    assert claim_probability(np.array([])) == 0.0


def test_an_answer_is_the_noisy_or_of_its_claims():
    assert answer_probability([0.5, 0.5]) == pytest.approx(0.75)
    assert answer_probability([0.2, 0.0, 0.5]) == pytest.approx(1 - 0.8 * 0.5)
    assert answer_probability([1.0, 1.0]) == pytest.approx(1 - 0.001 ** 2)  # capped: never exactly 1
    assert answer_probability([]) == 0.0


def test_tokens_are_grouped_by_the_claim_they_belong_to():
    p = np.array([0.9, 0.1, 0.3, 0.8, 0.2])
    claim_of = np.array([0, 0, -1, 1, 1])
    assert claim_probabilities(p, claim_of, 3) == pytest.approx([0.5, 0.5, 0.0])


def test_the_metric_uses_the_aggregation_its_card_names(monkeypatch):
    record = Record(question="When is it open?", contexts=["The museum opens at 9 am and closes at 6 pm."],
                    answer="The museum opens at 9 am. It has a rooftop cinema on Fridays.", language="en")
    by_max = get_metric("grounding_xe").score(record)
    card = {**grounding_module.model_card(), "aggregation": grounding_module.NOISY_OR, "span_threshold": 0.5}
    monkeypatch.setattr(grounding_module, "model_card", lambda: card)
    by_claims = get_metric("grounding_xe").score(record)
    assert by_max.ok and by_claims.ok
    claims = [c["p_unsupported"] for c in by_claims.details["claims"]]
    assert len(claims) == 2
    assert by_claims.value == pytest.approx(1 - (1 - claims[0]) * (1 - claims[1]), abs=1e-3)
    assert by_max.value == pytest.approx(max(c["p_unsupported"] for c in by_max.details["claims"]), abs=1e-4)
    assert all(s.score >= 0.5 for s in by_claims.spans)
