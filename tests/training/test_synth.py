"""The synthetic training data generator: schema, exact spans, determinism, no leaks of measurement data."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from groundtrace.backends.embedders import Embedder
from groundtrace.text import split_sentences
from groundtrace.text.numbers import NUMBER, parse_number

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
SPAN_TYPES = {"baseless", "number", "date", "entity", "negation", "dropped_condition"}


def _load_synth():
    spec = importlib.util.spec_from_file_location("synth", ROOT / "training" / "synth.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["synth"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


synth = _load_synth()
import synth_edits  # noqa: E402  (beside synth.py, which put training/ on the path)
import synth_sources  # noqa: E402


class HashedWordsEmbedder(Embedder):
    """Bag of hashed character bigrams: cheap, deterministic, and near for texts sharing words."""

    name = "hashed"

    def _embed(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 256), dtype=np.float32)
        for i, text in enumerate(texts):
            for j in range(len(text) - 1):
                rows[i, zlib.crc32(text[j : j + 2].encode()) % 256] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="module")
def passages():
    if not DATA.exists():
        pytest.fail(f"{DATA} is missing: the tests need the data of ../shared/data")
    return synth.load_sources(DATA, synth.HALUEVAL_WHEEL, per_source=60)


@pytest.fixture(scope="module")
def generated(passages):
    return synth.generate(passages, HashedWordsEmbedder(), per_language=20, seed=7)


def rows_of(generated):
    return [row for rows in generated.values() for row in rows]


def test_schema_and_balance(generated):
    expected = {"ru", "zh"} | ({"en"} if synth.HALUEVAL_WHEEL.exists() else set())
    assert expected <= set(generated)
    for language, rows in generated.items():
        assert len(rows) == 20
        assert sum(r["label"] for r in rows) == 10
        for row in rows:
            assert set(row) == {"id", "task", "language", "question", "contexts", "answer", "label", "spans",
                                "dataset", "split", "meta"}
            assert row["language"] == language and row["dataset"] == "synth" and row["split"] == "train"
            assert row["task"] in ("qa", "continuation")
            assert (row["question"] is None) == (row["task"] == "continuation")
            assert 1 <= len(row["contexts"]) <= 4 and all(isinstance(c, str) and c for c in row["contexts"])
            assert {"source", "injection", "paraphrase_ops"} <= set(row["meta"])


def test_spans_are_exact_and_match_the_label(generated):
    for row in rows_of(generated):
        assert row["label"] == int(bool(row["spans"]))
        for span in row["spans"]:
            assert span["type"] in SPAN_TYPES
            assert 0 <= span["start"] < span["end"] <= len(row["answer"])
            assert row["answer"][span["start"] : span["end"]] == span["text"]


def test_same_seed_same_data(passages, generated):
    again = synth.generate(passages, HashedWordsEmbedder(), per_language=20, seed=7)
    assert json.dumps(again, sort_keys=True) == json.dumps(generated, sort_keys=True)


def test_no_measurement_data_leaks(generated):
    whole, pieces = synth_sources.measurement_texts(DATA)
    long_answers = {t for t in whole if len(t) >= 40}
    for row in rows_of(generated):
        for context in row["contexts"]:
            norm = synth_sources.normalise(context)
            assert norm not in whole
            assert not any(s.text in pieces for s in split_sentences(norm))
        assert not any(a in row["answer"] for a in long_answers if len(a) < len(row["answer"]) + 1)


def test_changed_numbers_differ_from_every_context_number(generated):
    seen = 0
    for row in rows_of(generated):
        for span in row["spans"]:
            if span["type"] == "number":
                seen += 1
                value = parse_number(span["text"], row["language"])
                assert value not in synth_edits.context_numbers(row["contexts"], row["language"])
    assert seen  # the fixture's seed gives a few


def test_several_injection_types_in_a_run(generated):
    kinds = {span["type"] for row in rows_of(generated) for span in row["spans"]}
    assert "baseless" in kinds and len(kinds) >= 3


CASES = {
    "en": ("The permit costs 600 dollars and is valid from March 13, 2020, only if the owner lives in Dover.",
           ["The permit costs 600 dollars and is valid from March 13, 2020, only if the owner lives in Dover."]),
    "ru": ("Разрешение стоит 600 рублей и выдаётся с 12 марта 2020 года, но только при регистрации в Озёрске.",
           ["Разрешение стоит 600 рублей и выдаётся с 12 марта 2020 года, но только при регистрации в Озёрске."]),
    "zh": ("青川外国语学校2020年3月31日起招收2个班，每班25人，须参加英语笔试。",
           ["青川外国语学校2020年3月31日起招收2个班，每班25人，须参加英语笔试。"]),
}


@pytest.mark.parametrize("language", sorted(CASES))
@pytest.mark.parametrize("kind", ["number", "date", "negation", "dropped_condition", "entity"])
def test_each_injection_kind_labels_exactly(language, kind):
    sentence, contexts = CASES[language]
    donor = synth.Passage("d", language, "test", {"en": "Mary Jones met Tom Brown in Leeds.", "ru": "Иван Петров приехал в Тверь.",
                                                  "zh": "张伟在上海市工作。"}[language])
    sentences = [synth.Sentence(sentence)]
    assert synth.inject(kind, sentences, language, contexts, [donor], random.Random(1))
    start, end, span_kind = sentences[0].span
    assert span_kind == kind and sentences[0].text != sentence and start < end
    if kind == "number":
        value = parse_number(sentences[0].text[start:end], language)
        assert value not in {parse_number(m.group(), language) for m in re.finditer(NUMBER, contexts[0])}
    if kind == "dropped_condition":
        assert (start, end) == (0, len(sentences[0].text))


def test_baseless_sentence_comes_from_outside_the_contexts():
    contexts = ["The museum opens at 9 am. Tickets cost 12 dollars."]
    donor = synth.Passage("d", "en", "test", "The museum cafe serves vegan soup. The museum opens at 9 am.",
                          sentences=["The museum cafe serves vegan soup.", "The museum opens at 9 am."])
    assert synth.baseless_sentence([donor], contexts, "en", random.Random(0)) == "The museum cafe serves vegan soup."
