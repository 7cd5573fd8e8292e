"""The lexical seed, with values computed by hand from its formula."""

import math

import pytest

from groundtrace import get_metric
from groundtrace.text import terms
from groundtrace.text.bleu import sentence_bleu

EPS = 1e-6


def seed_h(b: float, j: float, p: float) -> float:
    return max((0.6 * b + 0.4 * j) * (1 - p), 0.0)


def test_english_by_hand():
    # context: students borrow books from the library   (6 tokens; keywords students borrow books library)
    # answer:  students borrow books from the museum    (6 tokens; keywords students borrow books museum)
    score = get_metric("lexical").score(
        {"contexts": ["Students borrow books from the library."], "answer": "Students borrow books from the museum."})
    j = 3 / 4
    p = 1 / (4 + EPS)
    b = (5 / 6) ** 0.7 * (4 / 5) ** 0.3  # 5 of 6 unigrams, 4 of 5 bigrams, equal lengths: no brevity penalty
    assert score.details["J"] == pytest.approx(j)
    assert score.details["P"] == pytest.approx(p)
    assert score.details["B"] == pytest.approx(b)
    assert score.value == pytest.approx(seed_h(b, j, p))
    assert score.details["U"] == ["museum"]
    assert [(s.start, s.end, s.text) for s in score.spans] == [(31, 37, "museum")]
    assert score.higher_is_better is True


def test_russian_by_hand():
    score = get_metric("lexical").score({"contexts": ["Библиотека работает утром."], "answer": "Библиотека работает вечером."})
    j, p = 2 / 3, 1 / (3 + EPS)
    b = (2 / 3) ** 0.7 * (1 / 2) ** 0.3
    assert score.details["language"] == "ru"
    assert score.value == pytest.approx(seed_h(b, j, p))
    assert score.details["U"] == ["вечером"]


def test_chinese_counts_words_of_two_characters():
    context, answer = "图书馆每天早上开门。", "图书馆每天早上关门。"
    assert [t.text for t in terms(context, "zh")] == ["图书馆", "每天", "早上", "开门"]
    assert [t.text for t in terms(answer, "zh")] == ["图书馆", "每天", "早上", "关门"]
    score = get_metric("lexical").score({"contexts": [context], "answer": answer})
    j, p = 3 / 4, 1 / (4 + EPS)
    b = (3 / 4) ** 0.7 * (2 / 3) ** 0.3
    assert score.value == pytest.approx(seed_h(b, j, p))
    assert score.details["U"] == ["关门"]


def test_bleu_is_the_mean_over_contexts_and_brevity_counts():
    # a context that shares nothing has BLEU 0; the mean halves the other one's
    score = get_metric("lexical").score(
        {"contexts": ["Students borrow books from the library.", "Completely unrelated words here."],
         "answer": "Students borrow books from the museum."})
    b = ((5 / 6) ** 0.7 * (4 / 5) ** 0.3 + 0.0) / 2
    assert score.details["B"] == pytest.approx(b)
    # a long reference punishes a short answer: BP = exp(1 - r/c)
    assert sentence_bleu("a b c d e f g h".split(), "a b".split(), (0.7, 0.3, 0, 0)) == pytest.approx(math.exp(1 - 8 / 2))


def test_fully_supported_answer_and_no_keywords():
    full = get_metric("lexical").score({"contexts": ["Students borrow books."], "answer": "Students borrow books."})
    assert full.details["J"] == 1 and full.details["P"] == 0 and full.value == pytest.approx(0.6 * 1 + 0.4 * 1)
    none = get_metric("lexical").score({"contexts": ["Students borrow books."], "answer": "It is so."})
    assert none.details["J"] == 0 and none.details["P"] == 0
    assert "no keywords" in none.reason


def test_weights_and_keyword_floor_are_parameters():
    record = {"contexts": ["Students borrow books from the library."], "answer": "Students borrow books from the museum."}
    b = (5 / 6) ** 0.7 * (4 / 5) ** 0.3
    only_bleu = get_metric("lexical", bleu_weight=1.0, keyword_weight=0.0).score(record)
    assert only_bleu.value == pytest.approx(b * (1 - 1 / (4 + EPS)))
    # with a floor of 6 characters "books" drops out: K_O = {students, borrow, museum}, 2 of 3 found
    floor = get_metric("lexical", min_keyword_chars=6).score(record)
    assert floor.details["J"] == pytest.approx(2 / 3)


def test_bleu_matches_nltk_on_real_text():
    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")
    import json
    import warnings

    from tests.conftest import shared_data

    rows = [json.loads(line) for line in open(shared_data("ragtruth_qa_dev.jsonl"), encoding="utf-8")][:40]
    warnings.simplefilter("ignore")
    for row in rows:
        hyp = [t.text for t in terms(row["answer"])]
        for context in row["contexts"]:
            ref = [t.text for t in terms(context)]
            for weights in [(0.7, 0.3, 0, 0), (0.25, 0.25, 0.25, 0.25)]:
                expected = nltk_bleu.sentence_bleu([ref], hyp, weights=weights)
                assert sentence_bleu(ref, hyp, weights) == pytest.approx(expected, abs=1e-12)
