"""grounding-3's training examples: pairs composed into RAG answers (training/xe/compose.py) and the
polarity/restriction twins of faithful answers (training/xe/polarity.py)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import compose, polarity  # noqa: E402


def _pairs(language: str, n: int) -> list[dict]:
    # premises chosen so that none is held out (is_heldout hashes the premise)
    rows = []
    i = 0
    while len(rows) < 2 * n:
        premise = f"Premise number {i} says that the museum opens at {i % 12 + 1} o'clock."
        i += 1
        if compose.is_heldout(premise):
            continue
        label = len(rows) % 2
        rows.append({"id": f"p{i}", "language": language, "dataset": "toy", "premise": premise, "label": label,
                     "hypothesis": f"Claim {i} is {'entailed' if label == 0 else 'not stated'} here."})
    return rows


def test_detokenize_rejoins_tokeniser_spaces():
    assert compose.detokenize("Two women , aged 30 , do n't stop ( here ) .") == "Two women, aged 30, don't stop (here)."
    assert compose.detokenize("It -LRB- a film -RRB- is old .") == "It (a film) is old."


def test_composed_answers_label_exactly_the_unsupported_hypothesis():
    pairs = _pairs("en", 40)
    by_id = {p["hypothesis"].rstrip("."): p for p in pairs}
    examples = compose.compose(pairs, "en", 60, random.Random(3), "t")
    assert len(examples) == 60 and {e["label"] for e in examples} == {0, 1}
    for ex in examples:
        assert bool(ex["spans"]) == bool(ex["label"])
        for s, e in ex["spans"]:
            text = ex["answer"][s:e]
            source = by_id[text[0].upper() + text[1:]]  # the joiner may have lower-cased its first letter
            assert source["label"] == 1
            assert source["premise"] in " ".join(ex["contexts"])  # the topic is there, the support is not
        assert not ex["answer"].startswith((" ", "Also", "In addition", "Moreover"))


def test_held_out_pairs_never_reach_training_examples():
    pairs = _pairs("ru", 30)
    held = {"id": "h", "language": "ru", "dataset": "toy", "label": 1, "hypothesis": "Секретная гипотеза.",
            "premise": next(f"Отложенная посылка {i}." for i in range(1000) if compose.is_heldout(f"Отложенная посылка {i}."))}
    examples = compose.compose(pairs + [held], "ru", 200, random.Random(0), "t")
    assert all(held["premise"] not in " ".join(e["contexts"]) and "Секретная" not in e["answer"] for e in examples)
    assert compose.heldout_pairs(pairs + [held], 10, random.Random(0)) and all(
        compose.is_heldout(p["contexts"][0]) for p in compose.heldout_pairs(pairs + [held], 10, random.Random(0)))


@pytest.mark.parametrize(("language", "text", "expected"), [
    ("en", "The library is not open on Sunday.", [("is not", "is"), ("open", "closed")]),
    ("en", "Entry is free before 9.", [("is", "is not"), ("free", "paid"), ("before", "after")]),
    ("ru", "Библиотека не работает в воскресенье, можно прийти до 12:00.",
     [("не работает", "работает"), ("можно", "нельзя"), ("до", "после")]),
    ("zh", "图书馆周一不开放，读者可以免费借书。", [("开放", "关闭"), ("可以", "不可以"), ("免费", "收费")]),
])
def test_flippable_words_and_what_they_flip_to(language, text, expected):
    spots = polarity.spots(text, language)
    assert [(s.word, s.replacement) for s in spots] == expected
    assert all(text[s.start:s.end] == s.word for s in spots)


def test_twins_flip_the_answer_the_context_or_both_and_restrict_the_scope():
    example = {"id": "x", "source": "synth", "language": "en", "question": "When can I visit?", "label": 0,
               "contexts": ["The gallery is open on Sunday from 10 to 18. Tickets are sold at the door."],
               "answer": "The gallery is open on Sunday from 10 to 18 o'clock."}
    twins = []
    for seed in range(20):  # the restriction twin is drawn in 60% of the calls
        twins = polarity.twins(example, random.Random(seed))
        if len(twins) == 5:
            break
    kinds = {t["source"]: t for t in twins}
    assert set(kinds) == {"synth+flip_answer", "synth+flip_context", "synth+flip_both", "synth+restrict_context",
                          "synth+restrict_both"}
    flipped = kinds["synth+flip_answer"]
    (s, e), = flipped["spans"]
    assert flipped["label"] == 1 and flipped["contexts"] == example["contexts"]
    word = flipped["answer"][s:e]
    assert word in ("is not", "closed") and flipped["answer"].replace(word, "", 1) != example["answer"]
    context_flip = kinds["synth+flip_context"]
    (s, e), = context_flip["spans"]
    assert context_flip["answer"] == example["answer"] and context_flip["label"] == 1
    assert example["answer"][s:e] in ("is", "open") and context_flip["contexts"] != example["contexts"]
    both = kinds["synth+flip_both"]
    assert both["label"] == 0 and both["spans"] == [] and both["answer"] == flipped["answer"]
    assert both["contexts"] == context_flip["contexts"]
    restricted = kinds["synth+restrict_context"]
    assert restricted["label"] == 1 and restricted["answer"] == example["answer"]
    assert restricted["spans"] == [[0, len(example["answer"])]] and ", but only for " in restricted["contexts"][0]
    both = kinds["synth+restrict_both"]
    assert both["label"] == 0 and ", but only for " in both["answer"] and both["contexts"] == restricted["contexts"]


def test_no_twins_without_shared_support_or_for_a_hallucinated_answer():
    unrelated = {"id": "y", "source": "synth", "language": "en", "question": None, "label": 0,
                 "contexts": ["Owls hunt at night in the forest."], "answer": "The gallery is open on Sunday from 10 to 18."}
    assert polarity.twins(unrelated, random.Random(0)) == []
    assert polarity.twins({**unrelated, "label": 1, "contexts": [unrelated["answer"]]}, random.Random(0)) == []
