"""Binary classification statistics for the hallucinated class (label 1), numpy only.

Scores are oriented so that higher means "more likely hallucinated"; a record is predicted
hallucinated when its score is >= the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); None when a class is absent."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if positives == 0 or negatives == 0:
        return None
    ranks = _average_ranks(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # 1-based ranks, with tied values sharing the mean of their positions
    _, first, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    mean_rank = first + (counts + 1) / 2.0
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.repeat(mean_rank, counts)
    return ranks


@dataclass(frozen=True)
class Confusion:
    """Counts of predictions against labels, and the rates of the hallucinated class."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def balanced_accuracy(self) -> float | None:
        if not (self.tp + self.fn) or not (self.tn + self.fp):
            return None
        return (self.recall + self.tn / (self.tn + self.fp)) / 2


def confusion(labels: np.ndarray, predicted: np.ndarray) -> Confusion:
    y = np.asarray(labels, dtype=bool)
    p = np.asarray(predicted, dtype=bool)
    return Confusion(int((p & y).sum()), int((p & ~y).sum()), int((~p & y).sum()), int((~p & ~y).sum()))


def best_f1_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The threshold that maximizes F1 of the hallucinated class (midway between adjacent scores)."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    candidates = np.unique(scores)
    if len(candidates) == 0:
        return 0.5
    # thresholds at each distinct score: predicting ">= t" for every t that changes a prediction
    order = np.argsort(-scores, kind="mergesort")
    sorted_scores, sorted_labels = scores[order], labels[order]
    tp = np.cumsum(sorted_labels)
    fp = np.cumsum(~sorted_labels)
    last_of_value = np.r_[sorted_scores[1:] != sorted_scores[:-1], True]
    tp, fp, cut = tp[last_of_value], fp[last_of_value], sorted_scores[last_of_value]
    positives = labels.sum()
    f1 = np.where(tp > 0, 2 * tp / (tp + fp + positives), 0.0)
    best = int(np.argmax(f1))
    return float(cut[best])


def reliability(labels: np.ndarray, scores: np.ndarray, bins: int = 10) -> list[dict]:
    """Observed hallucination rate per score bin: the data of a reliability diagram."""
    labels = np.asarray(labels, dtype=float)
    scores = np.clip(np.asarray(scores, dtype=float), 0.0, 1.0)
    index = np.minimum((scores * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        mask = index == b
        if mask.any():
            out.append({"bin": [b / bins, (b + 1) / bins], "n": int(mask.sum()),
                        "mean_score": float(scores[mask].mean()), "observed_rate": float(labels[mask].mean())})
    return out


def roc_curve(labels: np.ndarray, scores: np.ndarray) -> list[tuple[float, float]]:
    """(false positive rate, true positive rate) points from the strictest threshold down."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    distinct = np.r_[s[1:] != s[:-1], True]
    tps, fps = np.cumsum(y)[distinct], np.cumsum(~y)[distinct]
    p, n = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    return [(0.0, 0.0)] + [(float(f / n), float(t / p)) for t, f in zip(tps, fps, strict=True)]
