"""Training examples for the cross-encoder, from every source, in one shape:

    {"id", "source", "language", "question", "contexts", "answer", "label",
     "spans": [[start, end], ...] | null}      # null: hallucinated somewhere, where unknown (MIL loss)

Context ablation (shared/notes/detector-data.md) turns a faithful answer into a positive with the
*same text*: the context sentences that support one of its sentences are deleted, and that sentence
(plus any other whose support went with them) becomes the span. The pair differs only in support,
so wording, length and copy rate cannot separate it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterable, Iterator

from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import terms

# An answer sentence with less than this share of its content words left in the contexts after
# ablation counts as unsupported; one that keeps more is not used as an ablation target.
_ABLATED_COVERAGE = 0.5
# Context sentences sharing this share of the target's content words are taken out.
_SUPPORT_SHARE = 0.25


def read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def example(row: dict, source: str, spans: list | None, label: int | None = None, suffix: str = "",
            contexts: list[str] | None = None) -> dict:
    return {
        "id": row["id"] + suffix, "source": source, "language": row["language"], "question": row.get("question"),
        "contexts": row["contexts"] if contexts is None else contexts, "answer": row["answer"],
        "label": row["label"] if label is None else label, "spans": spans,
    }


def gold_spans(row: dict) -> list | None:
    if row["label"] == 0:
        return []
    spans = [[s["start"], s["end"]] for s in row.get("spans") or []]
    return spans or None


def _content(text: str, language: str) -> set[str]:
    stop = stopwords(language)
    return {t.text for t in terms(text, language) if t.text not in stop and (len(t.text) > 1 or t.text.isdigit())}


def _coverage(words: set[str], pool: set[str]) -> float:
    return len(words & pool) / len(words) if words else 1.0


def ablate(row: dict, rng: random.Random) -> dict | None:
    """The faithful ``row`` with the support of one answer sentence removed from its contexts."""
    language = row["language"]
    answer_sentences = [s for s in split_sentences(row["answer"]) if len(_content(s.text, language)) >= 3]
    if not answer_sentences:
        return None
    context_sentences = [(i, s.text) for i, c in enumerate(row["contexts"]) for s in split_sentences(c)]
    words = [(_content(text, language)) for _, text in context_sentences]
    pool_before = set().union(*words) if words else set()
    for target in rng.sample(answer_sentences, len(answer_sentences)):
        target_words = _content(target.text, language)
        drop = {k for k, w in enumerate(words) if _coverage(target_words, w) >= _SUPPORT_SHARE}
        if not drop or len(drop) == len(words):
            continue
        pool_after = set().union(*(w for k, w in enumerate(words) if k not in drop))
        if _coverage(target_words, pool_after) >= _ABLATED_COVERAGE:
            continue
        spans = []
        for s in split_sentences(row["answer"]):
            w = _content(s.text, language)
            if s is target or s.start == target.start or (
                    _coverage(w, pool_before) - _coverage(w, pool_after) > 0.25 and _coverage(w, pool_after) < 0.6):
                spans.append([s.start, s.end])
        contexts: list[list[str]] = [[] for _ in row["contexts"]]
        for k, (i, text) in enumerate(context_sentences):
            if k not in drop:
                contexts[i].append(text)
        joiner = "" if language == "zh" else " "
        kept = [joiner.join(parts) for parts in contexts if parts]
        return example(row, "ablation", spans, label=1, suffix=":ablated", contexts=kept)
    return None


def with_ablations(rows: Iterable[dict], source: str, rng: random.Random, share: float = 1.0) -> list[dict]:
    out = []
    for row in rows:
        out.append(example(row, source, gold_spans(row)))
        if row["label"] == 0 and rng.random() < share:
            twin = ablate(row, rng)
            if twin is not None:
                twin["source"] = f"{source}+ablation"
                out.append(twin)
    return out


def synth(directory: Path, per_language: int, rng: random.Random) -> list[dict]:
    rows = []
    for language in ("en", "ru", "zh"):
        pool = list(read_jsonl(directory / f"synth_{language}.jsonl"))
        rows += rng.sample(pool, min(per_language, len(pool)))
    return with_ablations(rows, "synth", rng)


def halueval_qa(path: Path, items: int, rng: random.Random) -> list[dict]:
    """Right answers (0), ChatGPT's wrong ones (1, span unknown), and right answers whose knowledge
    sentence is gone (1, the whole answer)."""
    pairs: dict[str, dict] = {}
    for row in read_jsonl(path):
        pairs.setdefault(row["id"].rsplit(":", 1)[0], {})[row["label"]] = row
    keys = rng.sample(sorted(k for k, v in pairs.items() if len(v) == 2), items)
    out = []
    for key in keys:
        right, wrong = pairs[key][0], pairs[key][1]
        out.append(example(right, "halueval_qa", []))
        out.append(example(wrong, "halueval_qa", None))
        answer = right["answer"].strip().casefold()
        if len(answer) < 4 or answer in {"yes", "no"}:
            continue
        sentences = [s.text for c in right["contexts"] for s in split_sentences(c)]
        kept = [s for s in sentences if answer not in s.casefold()]
        if 0 < len(kept) < len(sentences) and answer not in " ".join(kept).casefold():
            out.append(example(right, "halueval_qa+ablation", [[0, len(right["answer"])]], label=1,
                               suffix=":ablated", contexts=[" ".join(kept)]))
    return out


def uhgeval(path: Path, positives: int, negatives: int, rng: random.Random) -> list[dict]:
    rows = list(read_jsonl(path))
    pos = [r for r in rows if r["label"] == 1 and r["spans"]]
    neg = [r for r in rows if r["label"] == 0]
    chosen = rng.sample(pos, min(positives, len(pos))) + rng.sample(neg, min(negatives, len(neg)))
    return [example(r, "uhgeval", gold_spans(r)) for r in chosen]
