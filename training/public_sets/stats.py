"""Per-set statistics of the converted records, and the shortcut check: does one cheap feature alone
(answer length, or the share of answer words found in the contexts) separate the labels?"""

from __future__ import annotations

import statistics
from collections import Counter

import numpy as np

from groundtrace.measure.classification import roc_auc
from training.synth import overlap  # share of the answer's word tokens found in the contexts


def _auc(labels: list[int], feature: list[float]) -> float | None:
    value = roc_auc(np.array(labels), np.array(feature))
    return None if value is None else round(value, 3)


def shortcut_aucs(records: list[dict]) -> dict:
    """ROC AUC of each single feature, oriented so that 0.5 is no signal and 1.0 (or 0.0) separates
    the labels perfectly: longer answer -> hallucinated; fewer answer words copied -> hallucinated."""
    labels = [r["label"] for r in records]
    return {"answer_chars": _auc(labels, [len(r["answer"]) for r in records]),
            "uncopied_word_share": _auc(labels, [1.0 - overlap(r) for r in records])}


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def describe(records: list[dict]) -> dict:
    by_split = Counter(r["split"] for r in records)
    return {
        "rows": len(records),
        "hallucinated": sum(r["label"] for r in records),
        "train": by_split.get("train", 0),
        "heldout": by_split.get("heldout", 0),
        "heldout_hallucinated": sum(r["label"] for r in records if r["split"] == "heldout"),
        "heldout_sources": len({r["meta"]["source_id"] for r in records if r["split"] == "heldout"}),
        "train_sources": len({r["meta"]["source_id"] for r in records if r["split"] == "train"}),
        "heldout_groups": len({r["meta"]["source_group"] for r in records if r["split"] == "heldout"}),
        "train_groups": len({r["meta"]["source_group"] for r in records if r["split"] == "train"}),
        "with_spans": sum(bool(r["spans"]) for r in records),
        "median_answer_chars": _median([len(r["answer"]) for r in records]),
        "median_context_chars": _median([sum(len(c) for c in r["contexts"]) for r in records]),
        "domains": dict(Counter(r["meta"].get("domain") for r in records)),
        "shortcut_auc": shortcut_aucs(records),
        "shortcut_auc_heldout": shortcut_aucs([r for r in records if r["split"] == "heldout"]),
    }
