"""The public sets of other grounded text (training/data/public: summaries, dialogue replies, claims)
as training examples, balanced against the copy-share shortcut.

BEGIN's and FaithDial's faithful replies are mostly lifted from the knowledge and their hallucinated
ones mostly are not: the share of answer words not found in the contexts alone separates them (ROC
AUC 0.94 and 0.85; training/README.md, "Shortcuts"). A detector trained on them as they are learns
"copied = faithful". Two things take that away:

    twins     polarity and restriction twins (polarity.py) of faithful replies: one word flipped in
              the reply or in its support, or a restriction added to the support, so near-copies
              that are contradicted or over-claim (label 1) and near-copies that stay faithful
    balance   the records and twins of each set binned by their uncopied word share; in every bin
              at most ``ratio`` times as many of one label as of the other are kept (drawn at random),
              so that within a set the share says little about the label

``shortcut_auc`` measures what is left on what is trained on (training/xe/examples.py writes it).
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import numpy as np

from xe import data, polarity
from xe.jsonxz import read_xz

from groundtrace.measure.classification import roc_auc
from groundtrace.text.tokenize import words

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "public"
TRAIN_SETS = ("summedits", "begin", "faithdial", "wice", "wice_tokens")
HELDOUT_SETS = ("summedits", "begin", "faithdial", "wice", "lfqa", "qags")  # wice_tokens: all hallucinated
BINS = (0.0, 0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.01)  # uncopied word share


def uncopied(example: dict) -> float:
    """Share of the answer's word tokens not found in its contexts (training/synth.py's overlap, inverted)."""
    tokens = words(example["answer"], example["language"])
    context = set(words(" ".join(example["contexts"]), example["language"]))
    return 1.0 - sum(t in context for t in tokens) / max(1, len(tokens))


def shortcut_auc(examples: list[dict]) -> float | None:
    """ROC AUC of the uncopied word share against the label (0.5: no shortcut)."""
    labels = np.array([ex["label"] for ex in examples])
    if labels.min(initial=1) == labels.max(initial=0):
        return None
    value = roc_auc(labels, np.array([uncopied(ex) for ex in examples]))
    return None if value is None else round(float(value), 3)


def balance(examples: list[dict], ratio: float, rng: random.Random) -> list[dict]:
    """At most ``ratio`` times as many of the larger label as of the smaller in each uncopied-share
    bin (a bin with one label only keeps nothing); order kept."""
    bins: dict[int, dict[int, list[int]]] = defaultdict(lambda: {0: [], 1: []})
    for i, ex in enumerate(examples):
        share = uncopied(ex)
        b = next(k for k in range(len(BINS) - 1) if share < BINS[k + 1])
        bins[b][ex["label"]].append(i)
    keep: set[int] = set()
    for by_label in bins.values():
        smaller = min(len(by_label[0]), len(by_label[1]))
        cap = int(smaller * ratio)
        for indices in by_label.values():
            keep.update(rng.sample(indices, min(cap, len(indices))) if len(indices) > cap else indices)
    return [ex for i, ex in enumerate(examples) if i in keep]


def read_set(name: str, split: str = "train") -> list[dict]:
    return read_xz(PUBLIC / f"{name}_{split}.jsonl.xz")


def examples(rng: random.Random, *, ratio: float = 1.5, twins_per_set: int = 1000,
             balanced: tuple[str, ...] = ("begin", "faithdial", "wice")) -> tuple[list[dict], dict]:
    """Training examples of every public train set: its records, polarity twins of up to
    ``twins_per_set`` faithful ones, the sets in ``balanced`` balanced by copy share. Returns them and
    the shortcut AUC of each set before and after."""
    out, stats = [], {}
    for name in TRAIN_SETS:
        rows = [data.example(r, f"public/{name}", data.gold_spans(r)) for r in read_set(name)]
        faithful = [ex for ex in rows if ex["label"] == 0]
        twins = [t for ex in rng.sample(faithful, min(twins_per_set, len(faithful))) for t in polarity.twins(ex, rng)]
        pool = rows + twins
        kept = balance(pool, ratio, rng) if name in balanced else pool
        stats[name] = {"records": len(rows), "twins": len(twins), "kept": len(kept),
                       "kept_hallucinated": sum(ex["label"] for ex in kept),
                       "shortcut_auc_records": shortcut_auc(rows), "shortcut_auc_kept": shortcut_auc(kept)}
        out += kept
    stats["all"] = {"kept": len(out), "shortcut_auc_kept": shortcut_auc(out)}
    return out, stats
