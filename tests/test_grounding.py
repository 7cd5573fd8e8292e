"""The trained `grounding` detector: loads offline, ranks planted errors above faithful answers in
each language, points its spans at the planted text, windows long contexts, survives bad input."""

from __future__ import annotations

import importlib.resources
import json
import math
import threading
from itertools import pairwise

import numpy as np
import pytest

from groundtrace import Record
from groundtrace.detector.claims import split_claims
from groundtrace.detector.crossencoder import ONNX_FILE, CrossEncoder, shared_crossencoder
from groundtrace.detector.windows import MAX_TOKENS, answer_minimum, build_windows, context_windows
from groundtrace.metrics import get_metric
from groundtrace.metrics.grounding import CARD_FILE


@pytest.fixture(scope="module")
def grounding():
    return get_metric("grounding")


def test_model_ships_inside_the_installed_package_and_loads_offline():
    packaged = importlib.resources.files("groundtrace.detector")
    for name in ("grounding-xe.onnx", "grounding-xe.spm", "grounding-xe-normalizer.json", "grounding.json"):
        assert packaged.joinpath(name).is_file(), name
    assert ONNX_FILE.stat().st_size <= 60 * 1024 * 1024
    card = json.loads(CARD_FILE.read_text(encoding="utf-8"))
    assert 0.0 < card["threshold"] < 1.0 and 0.0 < card["claim_verdict"]["threshold"] < 1.0
    assert get_metric("grounding").threshold == card["claim_verdict"]["threshold"]
    assert get_metric("grounding_xe").threshold == get_metric("grounding", claims="xe").threshold == card["threshold"]
    scores = CrossEncoder().score("When?", ["The museum opens at 9 am."], "It opens at 9 am.")
    assert len(scores.p_unsupported) == len(scores.encoding) > 0
    assert all(0.0 <= p <= 1.0 for p in scores.p_unsupported)


def test_one_model_per_process_shared_by_threads_gives_the_same_scores():
    assert shared_crossencoder() is shared_crossencoder()
    model = shared_crossencoder()
    record = ("How long?", ["Books are lent for 21 days."], "You can keep a book for 21 days.")
    expected = model.score(*record).p_unsupported
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(model.score(*record).p_unsupported)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(np.allclose(r, expected, atol=1e-6) for r in results)


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
    start, end = answer.index(addition), answer.index(addition) + len(addition)
    assert score.spans and all(start <= s.start and s.end <= end for s in score.spans), score.spans
    assert sum(s.end - s.start for s in score.spans) >= len(addition) // 3  # most of it, not one stray token
    claims = score.details["claims"]
    assert len(claims) == 2 and claims[1]["p_unsupported"] > claims[0]["p_unsupported"]


LONG_ANSWER = "The museum opens at 9 am and closes at 6 pm, every day but Monday."


def read_long_context(metric):
    """The answer scored with its supporting sentence after ~40,000 characters of unrelated text,
    and without it: found only if the context is read to its end, not cut at 512 tokens."""
    filler = " ".join(f"Paragraph {i} describes the history of tram line {i} in great detail." for i in range(600))
    fact = "The museum opens at 9 am and closes at 6 pm every day except Monday."
    with_fact = metric.score(Record(question="When is the museum open?", contexts=[filler + " " + fact], answer=LONG_ANSWER))
    without = metric.score(Record(question="When is the museum open?", contexts=[filler], answer=LONG_ANSWER))
    assert with_fact.ok and without.ok
    assert with_fact.value < without.value - 0.1
    # "except Monday" supports "but Monday": flagged only when it is not read
    monday = LONG_ANSWER.index("Monday")
    assert any(s.start <= monday < s.end for s in without.spans)
    assert not any(s.start <= monday < s.end for s in with_fact.spans)
    assert all(a.end <= b.start for a, b in pairwise(without.spans))  # disjoint, in order
    return with_fact, without


def test_a_context_longer_than_the_encoder_window_is_read_to_its_end():
    with_fact, _ = read_long_context(get_metric("grounding", evidence="all"))
    assert with_fact.details["windows"] > 20  # the full reading: every window of the context


def test_windows_cover_every_context_and_answer_token_within_the_encoder_limit():
    tokenizer = shared_crossencoder().tokenizer
    context = " ".join(f"Sentence number {i} of a long context." for i in range(400))
    answer = tokenizer.encode(" ".join(f"Claim {i} of a long answer." for i in range(120)))
    windows = build_windows(tokenizer, "What does it say?", [context], answer)
    assert all(len(w.ids) <= MAX_TOKENS for w in windows)
    assert sorted(set(np.concatenate([w.answer_tokens for w in windows]).tolist())) == list(range(len(answer)))
    pieces = context_windows(np.arange(5000), 300)
    assert all(len(p) <= 300 for p in pieces) and pieces[0][0] == 0 and pieces[-1][-1] == 4999
    assert all(b[0] <= a[-1] for a, b in pairwise(pieces))  # consecutive windows overlap: nothing skipped
    values = [np.full(len(w.ids), float(i)) for i, w in enumerate(windows)]
    # a token's value is the minimum over the windows that read it: here the first window of its chunk
    first_of_chunk = {}
    for i, w in enumerate(windows):
        first_of_chunk.setdefault(int(w.answer_tokens[0]), i)
    minimum = answer_minimum(windows, values, len(answer))
    assert minimum[0] == 0.0 and minimum[-1] == float(max(first_of_chunk.values()))


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
    from groundtrace.scoring.engine import build_metrics
    from groundtrace.metrics import default_metrics

    monkeypatch.delenv("GROUNDTRACE_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-judge-by-itself")
    assert default_metrics() == ("grounding",)
    assert [m.name for m in build_metrics(None)] == ["grounding"]
    assert Settings.from_env({}).metrics == ["grounding"]
    assert Settings.from_env({"GROUNDTRACE_JUDGE_MODEL": "gpt-4o-mini"}).metrics == ["grounding", "faithfulness"]
    assert default_metrics({"GROUNDTRACE_JUDGE_MODEL": " "}) == ("grounding",)


SAMPLES = [
    "The Verkhneozersk resident permit costs 600 rubles a year; holders of electric cars get it free.",
    "Don't forget: the café's Wi-Fi password is “blue-lake-42” (case-sensitive) — ask staff at 08:30.",
    "Жители улиц, вошедших в зону платной парковки, могут оформить резидентное разрешение через МФЦ.",
    "Ещё раз: ёлку привезут 31 декабря, её установят на площади «Северная».",
    "居民身份证有效期限分为四档：16周岁以下为5年，16至25周岁为10年。",
    "证件有效期满前3个月内，即可到户籍所在地的公安机关申请换领（工本费20元）。",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ，１２３ and ﬁne ligatures",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_the_pruned_tokenizer_round_trips_ru_zh_en_without_unknown_tokens(text):
    tokenizer = shared_crossencoder().tokenizer
    enc = tokenizer.encode(text)
    assert tokenizer.unk_id not in enc.ids.tolist()
    # the offsets index the original text: every visible character belongs to exactly one token
    covered = np.zeros(len(text), dtype=int)
    for s, e in zip(enc.starts, enc.ends, strict=True):
        assert 0 <= s <= e <= len(text)
        covered[s:e] += 1
    visible = np.array([not ch.isspace() for ch in text])
    assert (covered[visible] == 1).all()


def test_the_tokenizer_knows_the_shared_data_without_unknown_tokens():
    from pathlib import Path

    tokenizer = shared_crossencoder().tokenizer
    benchmarks = Path(__file__).parents[1] / "benchmarks" / "data"
    unknown = total = 0
    for path in sorted(benchmarks.glob("paraphrase_*.jsonl")):
        for line in open(path, encoding="utf-8"):
            row = json.loads(line)
            for text in [row["answer"], *row["contexts"]]:
                ids = tokenizer.encode(text).ids
                unknown += int((ids == tokenizer.unk_id).sum())
                total += len(ids)
    assert total > 20_000 and unknown / total < 1e-4


def test_the_metric_is_built_without_its_detector_until_it_scores():
    """A process that only hands records to a scoring process (a server's worker) builds the metric for its name,
    threshold and direction: numpy and the detector stay out of it until an answer is scored here."""
    import subprocess
    import sys

    program = ("import sys; from groundtrace.metrics import get_metric; m = get_metric('grounding'); "
               "print(m.threshold == m.documented_threshold(), sorted(n for n in sys.modules "
               "if n == 'numpy' or n.startswith('groundtrace.detector')))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True []", done.stdout + done.stderr


def test_the_default_reading_is_named_alike_in_the_metric_and_the_detector():
    from groundtrace.detector.reading import DEFAULT_EVIDENCE
    from groundtrace.metrics.grounding import DEFAULT_EVIDENCE as METRIC_DEFAULT

    assert METRIC_DEFAULT == DEFAULT_EVIDENCE
