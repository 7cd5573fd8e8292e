"""Evidence selection (groundtrace/detector/evidence.py): BM25 by hand, each claim picks the sentences
that share its content in three languages, neighbours and passages, an unrelated pile does not grow
what is read; and `grounding` with evidence="select" keeps the Score contract with the real model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from groundtrace import Record
from groundtrace.detector.crossencoder import shared_crossencoder
from groundtrace.detector.evidence import BM25, content_terms, select_evidence
from groundtrace.detector.packing import evidence_windows
from groundtrace.detector.windows import ANSWER_CHUNK, MAX_TOKENS, context_windows
from groundtrace.metrics import get_metric
from tests.test_grounding import read_long_context

MUSEUM = ["The museum opens at 9 am. It closes at 6 pm on weekdays. Tickets cost 12 euros.",
          "Tram line 4 stops at the square. Trams run every 10 minutes."]
ANSWER = "The museum opens at 9 am. Tickets cost 12 euros."


def test_bm25_by_hand():
    bm25 = BM25([("museum", "opens", "9"), ("museum", "closes", "6"), ("tram", "line")])
    idf_opens = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # df = 1 of N = 3
    idf_museum = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df = 2
    mean_length = 8 / 3
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / mean_length)  # both matching documents hold 3 terms
    tf_part = 1 * (1.2 + 1) / (1 + norm)
    expected = [(idf_opens + idf_museum) * tf_part, idf_museum * tf_part, 0.0]
    assert np.allclose(bm25.scores(["opens", "museum", "unknown"]), expected)
    assert expected[0] == pytest.approx(1.38025, abs=1e-4)


def test_content_terms_drop_stopwords_fold_numbers_and_stem_russian():
    assert content_terms("The fee is 1 879 rubles.", "en") == ["fee", "1879", "rubles"]
    assert content_terms("Жители Верхнеозёрска оформляют разрешение", "ru") == ["жител", "верхн", "оформ", "разре"]
    assert content_terms("图书馆的图书借期为21天。", "zh") == ["图书馆", "图书", "借期", "21", "天"]


def test_each_claim_picks_its_sentence_and_neighbours_join_them_into_one_passage():
    alone = select_evidence("When?", MUSEUM, ANSWER, "en", k=1, neighbours=0)
    assert [c.text for c in alone.claims] == ["The museum opens at 9 am.", "Tickets cost 12 euros."]
    assert [[s.text for s in alone.evidence_of(c)] for c in range(2)] == [["The museum opens at 9 am."],
                                                                          ["Tickets cost 12 euros."]]
    # two sentences of one passage that are not adjacent are read as two passages
    assert alone.passages == ["The museum opens at 9 am.", "Tickets cost 12 euros."]
    with_neighbours = select_evidence("When?", MUSEUM, ANSWER, "en", k=1, neighbours=1)
    assert with_neighbours.kept == [0, 1, 2]
    assert with_neighbours.passages == [MUSEUM[0]]  # the run of three sentences, as written


def test_a_claim_that_lists_many_things_reads_every_sentence_that_names_one_and_their_titles():
    contexts = ["Gluten-containing grains. Wheat. Rye and barley. Triticale. Oats are safe.",
                "Washing your dog with apple cider vinegar. Mix a cup with water. Spray the coat to repel fleas."]
    answer = "Gluten is in wheat, rye, barley and triticale. Spraying the coat repels fleas."
    plain = select_evidence(None, contexts, answer, "en", k=1, neighbours=0, cover=False, titles=False)
    assert [len(p) for p in plain.picked] == [1, 1]
    full = select_evidence(None, contexts, answer, "en", k=1, neighbours=0)
    # the grains claim adds sentences until wheat, rye, barley and triticale are all read
    assert sorted(s.text for s in full.evidence_of(0)) == ["Rye and barley.", "Triticale.", "Wheat."]
    # each claim also reads the first sentence (the title) of every context it picked from
    assert [full.sentences[i].text for i in full.reads[1]] == ["Washing your dog with apple cider vinegar.",
                                                                "Spray the coat to repel fleas."]


def test_an_unrelated_pile_does_not_grow_what_is_read():
    pile = [f"Bus route {chr(65 + i)} was rerouted through the northern district." for i in range(20)]
    small = select_evidence("When?", MUSEUM, ANSWER, "en", k=2, neighbours=1)
    large = select_evidence("When?", pile[:10] + MUSEUM + pile[10:], ANSWER, "en", k=2, neighbours=1)
    assert large.passages == small.passages
    assert len(large.sentences) == len(small.sentences) + 20
    # a pile that shares words ("district 9", "12") is read only as far as k picks per claim reach
    sharing = [f"Bus route {i} was rerouted through district {i} in {1990 + i}." for i in range(20)]
    picked = select_evidence("When?", sharing + MUSEUM, ANSWER, "en", k=2, neighbours=1)
    assert len(picked.kept) <= 2 * 2 * 3  # claims x k x (a pick and its two neighbours)
    assert all(len(p) <= 2 for p in picked.picked)


@pytest.mark.parametrize(
    ("contexts", "answer", "language", "expected"),
    [
        (["Жители Верхнеозёрска оформляют разрешение в МФЦ. Пошлина составляет 500 рублей.",
          "Трамвай ходит каждые 10 минут."],
         "Пошлина — 500 рублей.", "ru", ["Пошлина составляет 500 рублей."]),
        (["图书馆的图书借期为21天。逾期每天罚款2元。", "地铁每十分钟一班。"], "逾期罚款每天2元。", "zh", ["逾期每天罚款2元。"]),
    ],
)
def test_russian_and_chinese_claims_find_their_sentence(contexts, answer, language, expected):
    picked = select_evidence(None, contexts, answer, language, k=1, neighbours=0)
    assert [s.text for s in picked.evidence_of(0)] == expected


class TableEmbedder:
    """Vectors given by the test: the cosines are known."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts):
        rows = np.array([self.vectors[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_embedding_selector_picks_by_cosine_and_hybrid_fuses_ranks():
    contexts = ["Admission is free for children. Adults pay twelve euros."]
    answer = "Grown-ups are charged 12 EUR."
    table = TableEmbedder({answer: [1.0, 0.0], "Admission is free for children.": [0.6, 0.8],
                           "Adults pay twelve euros.": [0.8, 0.6]})
    by_cosine = select_evidence(None, contexts, answer, "en", k=1, neighbours=0, selector="embedding", embedder=table)
    assert [s.text for s in by_cosine.evidence_of(0)] == ["Adults pay twelve euros."]  # cosine 0.8 > 0.6
    # no word is shared: the lexical selector picks nothing, the hybrid one follows the cosine
    assert select_evidence(None, contexts, answer, "en", k=1, neighbours=0).picked == [[]]
    hybrid = select_evidence(None, contexts, answer, "en", k=1, neighbours=0, selector="hybrid", embedder=table)
    assert [s.text for s in hybrid.evidence_of(0)] == ["Adults pay twelve euros."]


def test_bad_options_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="selector"):
        select_evidence(None, MUSEUM, ANSWER, "en", selector="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedder"):
        select_evidence(None, MUSEUM, ANSWER, "en", selector="embedding")
    with pytest.raises(ValueError, match="evidence"):
        get_metric("grounding", evidence="some")
    with pytest.raises(ValueError, match="k and max_windows must be >= 1"):
        get_metric("grounding", evidence="select", k=0)
    with pytest.raises(ValueError, match="true or false"):
        get_metric("grounding", evidence="select", fill="maybe")
    # options given as text (-O, GROUNDTRACE_OPTIONS) take their default's type
    assert get_metric("grounding", evidence="select", k="3", fill="false").reading.k == 3


@pytest.fixture(scope="module")
def selecting():
    return get_metric("grounding", evidence="select")


def test_selection_reads_one_window_where_the_full_reading_needs_dozens(selecting):
    # test_grounding's long-context case: the supporting sentence after ~40,000 characters
    with_fact, _ = read_long_context(selecting)
    assert with_fact.details["windows"] == 1
    assert with_fact.details["evidence"]["selected"] <= 2 * 3  # k = 2 picks and their neighbours


def test_the_score_contract_holds_under_selection(selecting):
    record = Record(question="When?", contexts=MUSEUM, answer=ANSWER + " Entry is free on Sundays.", language="en")
    score = selecting.score(record)
    assert score.ok and 0.0 <= score.value <= 1.0
    assert score.threshold == selecting.threshold
    assert [c["start"] for c in score.details["claims"]] == [0, 26, 49]
    assert all(0.0 <= c["p_unsupported"] <= 1.0 for c in score.details["claims"])
    assert all(record.answer[s.start:s.end] == s.text and 0.0 <= s.score <= 1.0 for s in score.spans)
    assert score.details["evidence"]["reading"] == "select"
    # the baseless last sentence is the least supported claim
    assert score.details["claims"][2]["p_unsupported"] == max(c["p_unsupported"] for c in score.details["claims"])


def test_each_answer_chunk_reads_the_evidence_of_its_own_claims_within_the_window():
    tokenizer = shared_crossencoder().tokenizer
    names = ["apple", "pear", "plum", "cherry", "grape", "melon", "lemon", "mango", "peach", "olive",
             "walnut", "almond", "carrot", "potato", "onion", "garlic", "pepper", "tomato", "radish", "turnip"]
    contexts = [" ".join(f"The {name} crate weighs {i + 3} kilograms at the northern depot." for i, name in enumerate(names))]
    answer = " ".join(f"A {name} crate weighs {i + 3} kilograms at that depot." for i, name in enumerate(names))
    encoding = tokenizer.encode(answer)
    assert len(encoding) > ANSWER_CHUNK  # two chunks
    found = select_evidence("How heavy?", contexts, answer, "en", k=1, neighbours=0, titles=False)
    windows = evidence_windows(tokenizer, "How heavy?", found, encoding)
    assert len(windows) == 2 and all(len(w.ids) <= MAX_TOKENS for w in windows)
    read = np.zeros(len(encoding), dtype=bool)
    for w in windows:
        read[w.answer_tokens] = True
    assert read.all()  # every answer token is read

    def evidence_text(w):
        return "".join(tokenizer.piece(i) for i in w.ids[:w.answer_offset]).replace("\u2581", " ")

    first, second = evidence_text(windows[0]), evidence_text(windows[1])
    # the first chunk holds the first crates' claims: it reads their sentences, not the last crate's
    assert "apple crate" in first and "turnip crate" not in first
    assert "turnip crate" in second and "apple crate" not in second


@pytest.mark.parametrize(("length", "size"), [(401, 400), (700, 400), (2000, 300), (300, 300)])
def test_balanced_context_windows_cover_the_evidence_in_as_many_shorter_windows(length, size):
    ids = np.arange(length)
    plain, balanced = context_windows(ids, size), context_windows(ids, size, balanced=True)
    assert len(balanced) == len(plain)
    assert len({len(w) for w in balanced}) == 1 and all(len(w) <= size for w in balanced)
    assert np.array_equal(np.unique(np.concatenate(balanced)), ids)  # every token, in order
    assert all(b[0] < a[-1] for a, b in zip(balanced, balanced[1:], strict=False))  # neighbours overlap
    if length == 401:
        assert [len(w) for w in balanced] == [233, 233]  # (401 + 64) / 2, not two windows of 400


def test_auto_reads_everything_while_it_is_cheap_and_selects_beyond():
    metric = get_metric("grounding")  # evidence="auto" is the default
    small = metric.score(Record(question="When?", contexts=MUSEUM, answer=ANSWER, language="en"))
    full = get_metric("grounding", evidence="all").score(Record(question="When?", contexts=MUSEUM, answer=ANSWER,
                                                                  language="en"))
    assert small.details["evidence"] == {"reading": "all"} and small.value == full.value
    with_fact, _ = read_long_context(metric)  # ~40,000 characters: 26 windows in full, selection reads 1
    assert with_fact.details["evidence"]["reading"] == "select" and with_fact.details["windows"] == 1
