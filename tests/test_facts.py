"""The facts seed, with a backend whose cosine is known, and with the real default embedder."""

import numpy as np
import pytest

from groundtrace import get_metric
from groundtrace.backends.embedders import USEEmbedder, windows_of
from tests.conftest import TableEmbedder

CONTEXT = "The fee is 1 879 rubles and the office opens on 5 March 2024 in Moscow."
ANSWER = "The fee is 1879 rubles, paid to Sberbank on 6 March 2024."


@pytest.fixture
def embedder():
    # cosine([1, 0], [0.6, 0.8]) = 0.6
    return TableEmbedder({ANSWER: [1.0, 0.0], CONTEXT: [0.6, 0.8]})


def test_hallucination_mode_by_hand(embedder):
    score = get_metric("facts", embedder=embedder).score({"contexts": [CONTEXT], "answer": ANSWER})
    # F(O) = {1879 rub, Sberbank, 2024-03-06}; F_h = {Sberbank, 2024-03-06}; E_f = 2/3
    assert score.details["S_c"] == pytest.approx(0.6)
    assert score.details["hallucinated_facts"] == ["Sberbank", "6 March 2024"]
    assert score.details["E_f"] == pytest.approx(2 / 3)
    assert score.value == pytest.approx(0.5 * (1 - 0.6) + 0.5 * 2 / 3)
    assert score.higher_is_better is False
    assert [ANSWER[s.start : s.end] for s in score.spans] == ["Sberbank", "6 March 2024"]


def test_seed_mode_counts_missing_facts(embedder):
    score = get_metric("facts", embedder=embedder, mode="seed").score({"contexts": [CONTEXT], "answer": ANSWER})
    # F(C) = {1879 rub, 2024-03-05, Moscow}; F_m = {2024-03-05, Moscow}; E_f = min((2 + 2) / 3, 1) = 1
    assert sorted(score.details["missing_facts"]) == ["5 March 2024", "Moscow"]
    assert score.details["E_f"] == 1.0
    assert score.value == pytest.approx(0.5 * 0.4 + 0.5 * 1.0)


def test_seed_mode_edge_cases_of_e_f():
    table = TableEmbedder({"No numbers here.": [1, 0], "Fee: 100 rubles.": [1, 0], "Nothing either.": [1, 0]})
    metric = get_metric("facts", embedder=table, mode="seed")
    # the answer has no facts but the context does: E_f = 1
    assert metric.score({"contexts": ["Fee: 100 rubles."], "answer": "No numbers here."}).details["E_f"] == 1.0
    # neither has facts: E_f = 0
    assert metric.score({"contexts": ["Nothing either."], "answer": "No numbers here."}).details["E_f"] == 0.0
    # hallucination mode ignores what the answer leaves out
    plain = get_metric("facts", embedder=table)
    assert plain.score({"contexts": ["Fee: 100 rubles."], "answer": "No numbers here."}).details["E_f"] == 0.0


def test_weights_are_parameters(embedder):
    score = get_metric("facts", embedder=embedder, concept_weight=0.4, fact_weight=0.6).score(
        {"contexts": [CONTEXT], "answer": ANSWER})
    assert score.value == pytest.approx(0.4 * 0.4 + 0.6 * 2 / 3)


def test_several_contexts_pool_facts_and_take_the_closest_context():
    table = TableEmbedder({"A fee of 100 rubles.": [1, 0], "Fee is 100 rubles.": [0.0, 1.0],
                           "Paid at Sberbank.": [0.8, 0.6]})
    record = {"contexts": ["Fee is 100 rubles.", "Paid at Sberbank."], "answer": "A fee of 100 rubles."}
    best = get_metric("facts", embedder=table).score(record)
    assert best.details["S_c"] == pytest.approx(0.8)
    assert best.details["E_f"] == 0.0
    mean = get_metric("facts", embedder=table, similarity="mean").score(record)
    assert mean.details["S_c"] == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("context", "faithful", "planted", "planted_text"),
    [
        ("Проживание в общежитии стоит 1 879 рублей в месяц.", "Общежитие стоит 1879 рублей в месяц.",
         "Общежитие стоит 2 500 рублей в месяц.", "2 500 рублей"),
        ("Items can be returned within 30 days of delivery.", "You can return items within 30 days.",
         "You can return items within 90 days.", "90 days"),
        ("商品签收后30天内可申请退款。", "签收后30天内可以退款。", "签收后90天内可以退款。", "90天"),
    ],
)
def test_real_embedder_flags_a_planted_number_in_each_language(context, faithful, planted, planted_text):
    metric = get_metric("facts")
    good = metric.score({"contexts": [context], "answer": faithful})
    bad = metric.score({"contexts": [context], "answer": planted})
    assert good.error is None and bad.error is None
    assert bad.value > good.value
    assert good.spans == []
    assert [s.text for s in bad.spans] == [planted_text]
    assert 0.0 <= good.details["S_c"] <= 1.0


def test_use_embedder_is_normalised_cached_and_windows_long_texts():
    embedder = USEEmbedder()
    vectors = embedder.embed(["Привет, мир", "Hello world", "你好世界", "Hello world"])
    assert vectors.shape == (4, 512)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[1], vectors[3])
    sentences = [f"Office {i} opens at {i % 12 + 1} o'clock." for i in range(2000)]
    long_text = " ".join(sentences)  # ~60,000 characters
    pieces = windows_of(long_text, embedder.window_chars)
    assert len(pieces) > 20 and all(len(p) <= embedder.window_chars for p in pieces)
    assert " ".join(pieces) == long_text  # every sentence is embedded, none dropped
    expected = embedder.embed(pieces).sum(axis=0)
    expected /= np.linalg.norm(expected)
    assert np.allclose(embedder.embed([long_text])[0], expected, atol=1e-5)


def test_int8_onnx_pass_matches_the_packages_numpy_pass_in_three_languages():
    texts = ["Плата за проживание в общежитии составляет 1 879 рублей в месяц.",
             "Items can be returned within 30 days of delivery for a full refund.",
             "商品签收后30天内可申请全额退款。", "ok", ""]
    fast = USEEmbedder(backend="onnx").embed(texts)
    reference = USEEmbedder(backend="numpy").embed(texts)
    assert np.all(np.sum(fast * reference, axis=1) > 0.999)
    # a text's embedding does not depend on the other texts of its batch
    alone = USEEmbedder(backend="onnx").embed([texts[1]])[0]
    assert np.allclose(alone, fast[1], atol=1e-5)


@pytest.mark.parametrize(
    ("context", "planted", "faithful", "planted_text"),
    [
        ("Refunds arrive within 5 business days.", "The warranty is 5 years.", "The refund takes five days.",
         "5 years"),
        ("Деньги возвращаются в течение 5 рабочих дней.", "Гарантия действует 5 лет.",
         "Деньги вернут за пять рабочих дней.", "5 лет"),
        ("退款将在5个工作日内到账。", "保修期为5年。", "退款五个工作日内到账。", "5年"),
    ],
)
def test_a_number_in_another_unit_is_a_hallucinated_fact(context, planted, faithful, planted_text):
    # cosine([1, 0], [0.8, 0.6]) = 0.8 for both answers; only the facts differ
    table = TableEmbedder({context: [0.8, 0.6], planted: [1.0, 0.0], faithful: [1.0, 0.0]})
    metric = get_metric("facts", embedder=table)
    bad = metric.score({"contexts": [context], "answer": planted})
    # F(O) = {5 year}; the context states 5 days, not 5 years: F_h = F(O), E_f = 1/1
    assert bad.details["hallucinated_facts"] == [planted_text]
    assert bad.details["E_f"] == 1.0
    assert bad.value == pytest.approx(0.5 * (1 - 0.8) + 0.5 * 1.0)
    assert [s.text for s in bad.spans] == [planted_text]
    good = metric.score({"contexts": [context], "answer": faithful})
    # F(O) = {5 day}, stated by the context in other words: E_f = 0
    assert good.details["hallucinated_facts"] == []
    assert good.details["E_f"] == 0.0
    assert good.value == pytest.approx(0.5 * (1 - 0.8))


@pytest.mark.parametrize(
    ("answer", "stated", "other"),
    [
        ("The library opens at 9:00.", "The library opens at 9:00 and closes at 18:00.", "The library opens at 10:00."),
        ("Библиотека открывается в 9:00.", "Библиотека открывается в 9:00 и закрывается в 18:00.",
         "Библиотека открывается в 10:00."),
        ("图书馆9:00开门。", "图书馆9:00开门，18:00关门。", "图书馆10:00开门。"),
    ],
)
def test_a_time_of_day_is_one_fact_supported_by_the_same_time(answer, stated, other):
    # cosine([1, 0], [0.8, 0.6]) = 0.8 against either context; only the facts differ
    table = TableEmbedder({answer: [1.0, 0.0], stated: [0.8, 0.6], other: [0.8, 0.6]})
    metric = get_metric("facts", embedder=table)
    good = metric.score({"contexts": [stated], "answer": answer})
    # F(O) = {09:00 (time)}, not the numbers 9 and 00; the context states 09:00: F_h = {}, E_f = 0
    assert good.details["answer_facts"] == ["9:00"]
    assert good.details["hallucinated_facts"] == [] and good.details["E_f"] == 0.0
    assert good.value == pytest.approx(0.5 * (1 - 0.8))
    bad = metric.score({"contexts": [other], "answer": answer})
    # the context states 10:00 only: F_h = {9:00}, E_f = 1/1
    assert bad.details["hallucinated_facts"] == ["9:00"] and bad.details["E_f"] == 1.0
    assert bad.value == pytest.approx(0.5 * (1 - 0.8) + 0.5 * 1.0)
    assert [(s.text, s.label) for s in bad.spans] == [("9:00", "unsupported time")]
    assert bad.reason.endswith("1 of 1 facts are not in the contexts: 9:00 (time)")


@pytest.mark.parametrize(
    ("text", "language", "facts"),
    [
        ("opens at 9:00", "en", [("time", "09:00", "9:00")]),
        ("opens at 09:00", "en", [("time", "09:00", "09:00")]),
        ("opens at 9:00 am", "en", [("time", "09:00", "9:00 am")]),
        ("from 9 a.m. to 9 pm", "en", [("time", "09:00", "9 a.m."), ("time", "21:00", "9 pm")]),
        ("at 12 am, at 12:30 pm, at 9.30 am", "en",
         [("time", "00:00", "12 am"), ("time", "12:30", "12:30 pm"), ("time", "09:30", "9.30 am")]),
        ("the alarm rang at 21:05:30", "en", [("time", "21:05:30", "21:05:30")]),
        ("открывается в 9:00, закрывается в 18:30", "ru", [("time", "09:00", "9:00"), ("time", "18:30", "18:30")]),
        ("9点开门，下午3点半关门，9时30分开会", "zh",
         [("time", "09:00", "9点"), ("time", "15:30", "下午3点半"), ("time", "09:30", "9时30分")]),
        # not times: a score, a ratio, an hour past 23, minutes past 59 or of one digit
        ("they won 2:1", "en", [("number", "2", "2"), ("number", "1", "1")]),
        ("mixed 3:1", "en", [("number", "3", "3"), ("number", "1", "1")]),
        ("at 24:00 or 9:75 or 9:5", "en", [("number", "24", "24"), ("number", "0", "00"), ("number", "9", "9"),
                                         ("number", "75", "75"), ("number", "9", "9"), ("number", "5", "5")]),
        ("3小时", "zh", [("number", "3 hour", "3小时")]),  # hours, a duration: not a time
    ],
)
def test_times_are_normalised_to_the_24_hour_clock(text, language, facts):
    from groundtrace.text.facts import extract_facts

    assert [(f.kind, f.key, f.text) for f in extract_facts(text, language)] == facts


def test_a_time_is_supported_by_the_same_time_in_another_form():
    from groundtrace.text.facts import FactIndex, extract_facts

    context = FactIndex.build("Doors open at 09:00 am and close at 21:05:30.", "en")
    assert [context.supports(f) for f in extract_facts("at 9:00, 9 am, 21:05, 9 pm and 10:00", "en")] == \
        [True, True, True, False, False]
