"""grounding-5: the claim features (hand-computed), the logistic verdict (hand-computed), the metric's reason and
spans in ru/zh/en, and verdict files fitted before it."""

from __future__ import annotations

import math

import pytest

from groundtrace.backends.verdict import VerdictModel
from groundtrace.combine.fitting import _stated
from groundtrace.detector.claim_features import FEATURES, claim_features
from groundtrace.detector.claim_verdict import ClaimVerdict
from groundtrace.detector.claims import split_claims
from groundtrace.metrics import get_metric
from groundtrace.metrics.grounding import model_card
from groundtrace.record import Record


def features(answer: str, contexts: list[str], language: str = "en", xe: float = 0.1) -> list[dict[str, float]]:
    claims = split_claims(answer, language)
    return [f.values for f in claim_features(claims, [xe] * len(claims), contexts, language)]


def only(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items() if v}


# stems (text/anchors.py): "opened" -> "open", "umbrellas" -> "umbrel"; digits, function words, "total" are no content
@pytest.mark.parametrize("language, answer, contexts, expected", [
    # a changed year: a conflict (text/conflicts.py), every word held, one claim of two content words
    ("en", "The museum opened in 1987.", ["The museum opened in 1978. It has 5 floors."],
     {"xe": 0.1, "conflict": 1.0, "length": round(math.log1p(2), 4)}),
    ("en", "The museum opened in 1978.", ["The museum opened in 1978. It has 5 floors."],
     {"xe": 0.1, "supported": 1.0, "length": round(math.log1p(2), 4)}),
    ("ru", "Музей открылся в 1987 году.", ["Музей открылся в 1978 году."],
     {"xe": 0.1, "conflict": 1.0, "length": round(math.log1p(2), 4)}),
    ("zh", "博物馆于1987年开放。", ["博物馆于1978年开放。"], {"xe": 0.1, "conflict": 1.0, "length": round(math.log1p(2), 4)}),
    ("ru", "Проживание стоит 2 450 рублей в месяц.", ["Проживание стоит 1 450 рублей в месяц."],
     {"xe": 0.1, "conflict": 1.0, "length": round(math.log1p(2), 4)}),
    # an invented sentence: of museum, sell, blue, umbrel only "museum" is in the contexts: 3/4 uncovered
    ("en", "The museum sells blue umbrellas.", ["The museum opened in 1978. It has 5 floors."],
     {"xe": 0.1, "uncovered": 0.75, "best_uncovered": 0.75, "length": round(math.log1p(4), 4)}),
    # a dropped condition: the sentence holding all of the claim's words bounds it ("over"), the claim does not
    ("en", "Delivery is free.", ["Delivery is free for orders over €50."],
     {"xe": 0.1, "dropped_condition": 1.0, "length": round(math.log1p(2), 4)}),
    ("en", "Pets are not allowed in the rooms.", ["Pets are allowed in the rooms."],
     {"xe": 0.1, "negation": 1.0, "length": round(math.log1p(3), 4)}),
    # a name the contexts do not state, in a claim half of whose words (found, museum) one sentence holds
    ("en", "Anna Petrova founded the museum.", ["Maria Lopez founded the museum."],
     {"xe": 0.1, "absent_name": 1.0, "absent_in_copy": 0.5, "uncovered": 0.5, "best_uncovered": 0.5,
      "length": round(math.log1p(4), 4)}),
    # a total the evidence supports is a supported fact, no conflict and no absence
    ("en", "The hall has 42 seats in total.", ["The hall has 12 seats in the balcony and 30 seats in the stalls."],
     {"xe": 0.1, "supported": 1.0, "length": round(math.log1p(2), 4)}),
])
def test_claim_features_by_hand(language, answer, contexts, expected):
    [values] = features(answer, contexts, language)
    assert set(values) == set(FEATURES)
    assert only(values) == expected


def test_position_runs_from_the_first_claim_to_the_last():
    values = features("The museum opened in 1978. It has 5 floors. It closes at 6 pm.",
                      ["The museum opened in 1978. It has 5 floors. It closes at 6 pm."])
    assert [v["position"] for v in values] == [0.0, 0.5, 1.0]


def test_the_verdict_by_hand():
    verdict = ClaimVerdict.from_card({"claim_verdict": {
        "features": ["xe", "conflict"], "mean": [0.2, 0.0], "scale": [0.4, 0.5], "coef": [2.0, 3.0],
        "intercept": -1.0, "language_offsets": {"ru": 0.5}}})
    # z = -1 + 0.5 + 2 * (0.6 - 0.2) / 0.4 + 3 * (1 - 0) / 0.5 = 7.5
    assert verdict.logit({"xe": 0.6, "conflict": 1.0}, "ru") == pytest.approx(7.5)
    assert verdict.probability({"xe": 0.6, "conflict": 1.0}, "ru") == pytest.approx(1 / (1 + math.exp(-7.5)))
    # English has no offset; z = -1 + 2 * (0 - 0.2) / 0.4 + 0 = -2
    assert verdict.probability({"xe": 0.0, "conflict": 0.0}, "en") == pytest.approx(1 / (1 + math.exp(2.0)))
    assert verdict.contributions({"xe": 0.6, "conflict": 1.0}) == {"xe": 2.0, "conflict": 6.0}
    assert verdict.xe_sensitivity() == pytest.approx(2.0 / 0.4 / 4)
    with pytest.raises(ValueError, match="different lengths"):
        ClaimVerdict.from_card({"claim_verdict": {"features": ["xe"], "mean": [0.0, 1.0], "scale": [1.0],
                                                  "coef": [1.0], "intercept": 0.0}})


def test_the_shipped_verdict_reads_every_feature_and_moves_within_the_cross_encoders_tolerance():
    card = model_card()
    verdict = ClaimVerdict.from_card(card)
    assert verdict.features == FEATURES and card["version"] == "grounding-5" and card["xe_version"] == "grounding-2.1"
    # a value differs between CPUs by at most the cross-encoder's tolerance times this slope
    assert verdict.xe_sensitivity() * card["numerics"]["tolerance"] < 5e-5


CONTEXT = {
    "en": "The Larkfield museum opened in 1978. Express shipping costs $14.99 per order.",
    "ru": "Проживание в общежитии стоит 1 450 рублей в месяц. Музей открылся в 1978 году.",
    "zh": "博物馆于1978年开放。快递费用为14.99美元。",
}


@pytest.mark.parametrize("language, answer, said, wrong", [
    ("en", "The Larkfield museum opened in 1987.", "1978", "1987"),
    ("en", "Express shipping costs $19.99 per order.", "$14.99", "$19.99"),
    ("ru", "Проживание в общежитии стоит 2 450 рублей в месяц.", "1 450 рублей", "2 450 рублей"),
    ("zh", "博物馆于1987年开放。", "1978年", "1987年"),
])
def test_a_changed_fact_is_flagged_named_in_the_reason_and_spanned(language, answer, said, wrong):
    score = get_metric("grounding").score(Record(question="?", contexts=[CONTEXT[language]], answer=answer,
                                                 language=language))
    assert score.ok and score.hallucinated and score.details["model"] == "grounding-5"
    assert f"the contexts say {said}; the answer says {wrong}" in score.reason
    start = answer.index(wrong)
    assert any(s.start <= start and start + len(wrong) <= s.end for s in score.spans)
    claim = score.details["claims"][0]
    assert claim["conflicts"][0]["rule"] in ("conflict_year", "conflict_value")
    assert claim["contributions"]["conflict"] > 0


@pytest.mark.parametrize("language, answer", [
    ("en", "The museum in Larkfield was opened in 1978."),
    ("en", "Each order shipped express costs $14.99."),
    ("ru", "За месяц проживания в общежитии платят 1 450 рублей."),
    ("ru", "Музей был открыт в 1978 году."),
    ("zh", "博物馆在1978年开放。"),
    ("zh", "快递每单收费14.99美元。"),
])
def test_a_faithful_rewording_is_not_flagged(language, answer):
    # not every one: "Проживание в общежитии обходится в 1 450 рублей ежемесячно." is flagged (the cross-encoder's
    # 0.9 outweighs its supported fact); docs/benchmarks/quality.md gives the rate on the paraphrase sets
    score = get_metric("grounding").score(Record(question="?", contexts=[CONTEXT[language]], answer=answer,
                                                 language=language))
    assert score.ok and not score.hallucinated and score.spans == []
    assert score.reason.startswith("all 1 claims look supported")


def test_an_invented_sentence_is_spanned_whole_where_nothing_else_marks_it():
    answer = "The Larkfield museum opened in 1978. Visitors can rent bicycles at the gift shop on Sundays."
    score = get_metric("grounding").score(Record(question="?", contexts=[CONTEXT["en"]], answer=answer))
    assert score.hallucinated and "1 of 2 claims" in score.reason
    invented = answer.index("Visitors")
    assert score.spans and all(s.start >= invented for s in score.spans)


def test_grounding_xe_is_grounding_21_the_highest_claim_of_the_cross_encoder():
    record = Record(question="?", contexts=[CONTEXT["en"]], answer="The Larkfield museum opened in 1987. It is big.")
    five, xe = get_metric("grounding").score(record), get_metric("grounding_xe").score(record)
    assert xe.details["model"] == "grounding-2.1" and xe.threshold == model_card()["threshold"]
    assert xe.value == pytest.approx(max(c["p_xe"] for c in five.details["claims"]), abs=1e-4)  # rounded to 4
    with pytest.raises(ValueError, match="claims must be one of"):
        get_metric("grounding", claims="nli")


def test_a_verdict_file_written_before_grounding_5_keeps_the_reading_it_was_fitted_on():
    raw = {"format": "groundtrace-verdict/1", "components": [{"metric": "grounding", "options": {}}],
           "model": {"features": ["grounding"], "mean": [0.0], "scale": [1.0], "coef": [1.0], "intercept": 0.0},
           "threshold": 0.5}
    assert VerdictModel.from_dict(raw).components[0].options == {"claims": "xe"}
    fitted = {**raw, "components": [{"metric": "grounding", "options": _stated("grounding", {})}]}
    assert VerdictModel.from_dict(fitted).components[0].options == {"claims": "verdict"}
    assert _stated("grounding", {"claims": "xe"}) == {"claims": "xe"} and _stated("lexical", {}) == {}


def test_the_demos_planted_russian_price_is_caught_and_named():
    from groundtrace_demo.data import corpus, questions

    texts = {p.id: p.text for p in corpus()}
    demo = {q.id: q for q in questions()}
    price = demo["ru-2"]  # 2 450 рублей where the regulations say 1 450
    score = get_metric("grounding").score(Record(question=price.question, answer=price.answer,
                                                 contexts=[texts[s] for s in price.sources]))
    assert score.hallucinated and "the contexts say 1 450 рублей; the answer says 2 450 рублей" in score.reason
    assert any(s.text == "2 450 рублей" for s in score.spans)
    faithful = [q for q in demo.values() if q.tag == "faithful"]
    flagged = [q.id for q in faithful if get_metric("grounding").score(
        Record(question=q.question, answer=q.answer, contexts=[texts[s] for s in q.sources])).hallucinated]
    assert flagged == []
