"""What one metric's verdicts come to at a threshold: the flagged share and, against labels, the
confusion cells, precision, recall, F1, balanced accuracy and AUC.

The arithmetic is ``groundtrace bench``'s, so that a threshold tried in the report or the review app
gives the figures bench gives at it: a record is flagged when its value is below the threshold for a
metric where higher is better and at or above it otherwise (``Metric.verdict``: a value equal to the
threshold is flagged only where higher means more hallucinated); a failed Score is counted as an
error and left out of every rate; label 1 is unsupported. views.js.j2 repeats it for the page's
slider, and tests/report check that both give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from groundtrace.measure.classification import confusion, roc_auc
from groundtrace.score import Score, ScoredRecord

DEFAULT_THRESHOLD = 0.5  # for a metric whose Scores name no threshold (none of groundtrace's do that)
CELLS = ("tp", "fp", "fn", "tn")

# labels by record id (a review labels file, a labelled file), or one per row in the rows' order
Labels = Mapping[str, int] | Sequence[int | None] | None


def verdict(value: float, threshold: float, higher_is_better: bool) -> bool:
    """Hallucinated at ``threshold``: Metric.verdict, for a value read back from a file."""
    return value < threshold if higher_is_better else value >= threshold


def aligned(rows: Sequence[ScoredRecord], labels: Labels) -> list[int | None]:
    """One 0/1 label (or None) per row: a mapping is joined by record id, a sequence is taken as it is."""
    if labels is None:
        return [None] * len(rows)
    if isinstance(labels, Mapping):
        return [_binary(labels.get(row.id)) if row.id is not None else None for row in rows]
    out = [_binary(label) for label in labels]
    if len(out) != len(rows):
        raise ValueError(f"{len(out)} labels for {len(rows)} rows")
    return out


def _binary(label: Any) -> int | None:
    return int(label) if label in (0, 1, True, False) else None


def default_threshold(rows: Sequence[ScoredRecord], metric: str) -> float:
    """The threshold the metric's Scores were given (the first that names one)."""
    for row in rows:
        score = row.score(metric)
        if score is not None and score.threshold is not None:
            return score.threshold
    return DEFAULT_THRESHOLD


def direction(rows: Sequence[ScoredRecord], metric: str) -> bool:
    """higher_is_better of the metric's Scores."""
    return next((s.higher_is_better for row in rows if (s := row.score(metric)) is not None), True)


def rates(scores: Sequence[Score | None], labels: Sequence[int | None], threshold: float,
          higher_is_better: bool) -> dict[str, Any]:
    """The figures of one metric's Scores (None: the row has no Score of it) at ``threshold``;
    ``cells`` lists the positions of the labelled rows in each confusion cell."""
    records = errors = flagged = 0
    cells: dict[str, list[int]] = {cell: [] for cell in CELLS}
    truth, predicted, oriented = [], [], []
    for position, (score, label) in enumerate(zip(scores, labels, strict=True)):
        if score is None:
            continue
        records += 1
        if score.value is None:  # bench's rule: a failed Score has no value (an error beside a value still counts)
            errors += 1
            continue
        hit = verdict(score.value, threshold, higher_is_better)
        flagged += hit
        if label is None:
            continue
        cells[("t" if hit == bool(label) else "f") + ("p" if hit else "n")].append(position)
        truth.append(label)
        predicted.append(hit)
        oriented.append(score.hallucination_score)
    scored = records - errors
    out: dict[str, Any] = {
        "threshold": threshold, "higher_is_better": higher_is_better, "records": records, "errors": errors,
        "scored": scored, "flagged": flagged, "flagged_share": flagged / scored if scored else None,
        "labelled": len(truth), "positives": int(sum(truth)),
        **{cell: len(members) for cell, members in cells.items()},
        "precision": None, "recall": None, "f1": None, "balanced_accuracy": None, "auc": None,
        "cells": cells,
    }
    if truth:
        c = confusion(np.array(truth), np.array(predicted))  # bench's own Confusion: 0.0 where a rate is undefined
        out.update(precision=c.precision, recall=c.recall, f1=c.f1, balanced_accuracy=c.balanced_accuracy,
                   auc=roc_auc(np.array(truth), np.array(oriented, dtype=float)))
    return out


def confusion_at(rows: Sequence[ScoredRecord], metric: str, threshold: float | None = None,
                 labels: Labels = None) -> dict[str, Any]:
    """``metric`` on ``rows`` at ``threshold`` (default: the one its Scores were given).

    Keys: metric, threshold, higher_is_better; records (rows with a Score of the metric), errors,
    scored, flagged, flagged_share; labelled (scored rows with a label), positives, tp, fp, fn, tn,
    precision, recall, f1, balanced_accuracy, auc (None without labelled rows, as balanced_accuracy
    and auc are where one class is absent); cells: {"tp": [row index, ...], ...}."""
    cut = default_threshold(rows, metric) if threshold is None else float(threshold)
    return {"metric": metric, **rates([row.score(metric) for row in rows], aligned(rows, labels), cut,
                                      direction(rows, metric))}
