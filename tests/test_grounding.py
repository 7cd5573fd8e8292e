"""The trained `grounding` detector: loads offline, ranks planted errors above faithful answers in
each language, points its spans at the planted text, windows long contexts, survives bad input."""

from __future__ import annotations

import importlib.resources
import json
import math

import pytest

from groundtrace import Record
from groundtrace.detector.features import FEATURE_NAMES, split_claims
from groundtrace.detector.model import CARD_FILE, MODEL_FILE, DetectorModel
from groundtrace.metrics import get_metric


@pytest.fixture(scope="module")
def grounding():
    return get_metric("grounding")


def test_model_ships_inside_the_installed_package_and_loads_offline():
    packaged = importlib.resources.files("groundtrace.detector")
    assert packaged.joinpath("grounding.onnx").is_file()
    assert packaged.joinpath("grounding.json").is_file()
    assert MODEL_FILE.stat().st_size <= 40 * 1024 * 1024
    card = json.loads(CARD_FILE.read_text(encoding="utf-8"))
    assert tuple(card["features"]) == FEATURE_NAMES
    assert 0.0 < card["threshold"] < 1.0
    model = DetectorModel()
    import numpy as np

    p = model.predict(np.zeros((3, len(FEATURE_NAMES)), np.float32))
    assert p.shape == (3,) and all(0.0 <= v <= 1.0 for v in p)


def test_model_refuses_a_card_trained_on_other_features(tmp_path):
    card = json.loads(CARD_FILE.read_text(encoding="utf-8"))
    card["features"] = card["features"][:-1]
    (tmp_path / "card.json").write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(RuntimeError, match="retrain"):
        _ = DetectorModel(card=tmp_path / "card.json").threshold


PLANTED = {
    "en": (
        (
            "The library lends books for 21 days. Readers may renew a loan twice online, unless another "
            "reader has reserved the book. Overdue books cost 20 cents a day."
        ),
        "Books are lent for 21 days and a loan can be renewed twice online unless someone reserved the book.",
        "Books are lent for 45 days and a loan can be renewed twice online unless someone reserved the book.",
        "45",
    ),
    "ru": (
        (
            "Библиотека выдаёт книги на 21 день. Продлить выдачу можно дважды через сайт, если книгу не "
            "забронировал другой читатель. За каждый день просрочки начисляется 20 рублей."
        ),
        "Книги выдают на 21 день, продлить выдачу можно дважды через сайт.",
        "Книги выдают на 45 дней, продлить выдачу можно дважды через сайт.",
        "45",
    ),
    "zh": (
        "图书馆的图书借期为21天。读者可以在网上续借两次，但如果其他读者已经预约了该书则不能续借。逾期每天罚款2元。",
        "图书借期为21天，读者可以在网上续借两次。",
        "图书借期为45天，读者可以在网上续借两次。",
        "45",
    ),
}


@pytest.mark.parametrize("language", ["en", "ru", "zh"])
def test_a_planted_number_scores_higher_and_its_span_lands_on_it(grounding, language):
    context, faithful, planted, number = PLANTED[language]
    question = {"en": "How long can I keep a book?", "ru": "На сколько выдают книги?", "zh": "图书可以借多久？"}[language]
    good = grounding.score(Record(question=question, contexts=[context], answer=faithful, language=language))
    bad = grounding.score(Record(question=question, contexts=[context], answer=planted, language=language))
    assert good.ok and bad.ok, (good.error, bad.error)
    # The faithful answers reword the context; the detector may still rate a rewording as doubtful
    # (the model card's first limit), so the test asks for the ranking, not for a clean verdict.
    assert bad.value > good.value
    assert bad.hallucinated
    start = planted.index(number)
    assert any(s.start <= start < s.end for s in bad.spans), bad.spans
    assert all(planted[s.start : s.end] == s.text for s in bad.spans)


def test_a_baseless_sentence_is_flagged_as_a_whole(grounding):
    context = PLANTED["en"][0]
    addition = "Members also get free access to the city swimming pool on weekends."
    answer = "Books are lent for 21 days. " + addition
    score = grounding.score(Record(question="What are the rules?", contexts=[context], answer=answer, language="en"))
    assert score.hallucinated
    start = answer.index(addition)
    assert [(s.start, s.end) for s in score.spans] == [(start, start + len(addition))]
    claims = score.details["claims"]
    assert len(claims) == 2 and claims[1]["p_unsupported"] > claims[0]["p_unsupported"]


def test_a_context_longer_than_the_encoder_window_is_read_to_its_end(grounding):
    # The supporting sentence sits after ~40,000 characters of unrelated text: found only if the
    # context is split and every piece embedded, not cut at the encoder's limit.
    filler = " ".join(f"Paragraph {i} describes the history of tram line {i} in great detail." for i in range(600))
    fact = "The museum opens at 9 am and closes at 6 pm every day except Monday."
    answer = "The museum opens at 9 am and closes at 6 pm, every day but Monday."
    with_fact = grounding.score(Record(question="When is the museum open?", contexts=[filler + " " + fact], answer=answer))
    without = grounding.score(Record(question="When is the museum open?", contexts=[filler], answer=answer))
    assert with_fact.ok and without.ok
    assert with_fact.details["context_sentences"] > 600
    assert with_fact.value < without.value
    assert without.hallucinated and not with_fact.hallucinated


def test_claims_cut_long_sentences_at_clause_joints():
    answer = "The indoor pool opens at nine in the morning on weekdays, and annual members bring two guests without charge."
    claims = split_claims(answer, "en")
    assert [c.text for c in claims] == [
        "The indoor pool opens at nine in the morning on weekdays",
        "annual members bring two guests without charge.",
    ]
    # a short side is no claim of its own: "X, and Y" stays whole when Y has under 4 content words
    assert len(split_claims("The indoor pool opens at nine in the morning on weekdays, and it is warm.", "en")) == 1
    assert all(answer[c.start : c.end] == c.text for c in claims)


@pytest.mark.parametrize(
    "record, expected",
    [
        ({"question": "q", "contexts": ["some context"], "answer": ""}, "answer is empty"),
        ({"question": "q", "contexts": ["some context"]}, "no 'answer'"),
        ({"question": "q", "answer": "An answer."}, "no 'contexts'"),
        ({"question": "q", "contexts": ["c"], "answer": "x" * 100_001}, "more than this metric's limit"),
        ({"question": "q", "contexts": 42, "answer": "An answer."}, "invalid record"),
    ],
)
def test_bad_input_gives_an_error_score_with_a_reason(grounding, record, expected):
    score = grounding.score(record)
    assert score.value is None and expected in score.error


def test_junk_and_empty_contexts_give_defined_scores(grounding):
    junk = grounding.score({"question": "q", "contexts": ["\x00\x01\ufffd" * 50], "answer": "\x00\x02 \ufffd\ufffd"})
    assert junk.ok and math.isfinite(junk.value)
    none = grounding.score({"question": "q", "contexts": ["", "   "], "answer": "The answer is 42."})
    assert none.value == 1.0 and none.hallucinated and "no contexts" in none.reason
    assert [(s.start, s.end) for s in none.spans] == [(0, len("The answer is 42."))]


def test_grounding_is_the_default_metric_unless_a_judge_is_configured(monkeypatch):
    from groundtrace.config import Settings
    from groundtrace.engine import build_metrics
    from groundtrace.metrics import default_metrics

    monkeypatch.delenv("GROUNDTRACE_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-judge-by-itself")
    assert default_metrics() == ("grounding",)
    assert [m.name for m in build_metrics(None)] == ["grounding"]
    assert Settings.from_env({}).metrics == ["grounding"]
    assert Settings.from_env({"GROUNDTRACE_JUDGE_MODEL": "gpt-4o-mini"}).metrics == ["grounding", "faithfulness"]
    assert default_metrics({"GROUNDTRACE_JUDGE_MODEL": " "}) == ("grounding",)
