"""What the top of the report says: per metric, the distribution, flagged share, errors and speed;
across metrics, the slowest records and the first errors; against labels, how well each metric
separates hallucinated from faithful answers."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from groundtrace.measure.classification import Confusion, confusion
from groundtrace.report.labels import Gold
from groundtrace.report.plots import (
    Histogram,
    Reliability,
    Roc,
    histogram,
    reliability_plot,
    roc_plot,
)
from groundtrace.score import ScoredRecord


@dataclass
class LabelledStats:
    """A metric against gold labels: ROC and reliability over its scores, and the confusion of its
    own verdicts (the thresholds stored in the Scores)."""

    n: int
    positives: int
    roc: Roc | None
    reliability: Reliability | None
    verdicts: Confusion


@dataclass
class MetricSummary:
    name: str
    higher_is_better: bool
    threshold: float | None
    records: int
    errors: int
    flagged: int
    mean: float | None
    mean_latency_ms: float | None
    histogram: Histogram
    labelled: LabelledStats | None = None

    @property
    def scored(self) -> int:
        return self.records - self.errors

    @property
    def flagged_share(self) -> float | None:
        return self.flagged / self.scored if self.scored else None


def metric_names(rows: Sequence[ScoredRecord]) -> list[str]:
    """Metric names in the order they first appear."""
    return list(dict.fromkeys(s.metric for r in rows for s in r.scores))


def summarize(rows: Sequence[ScoredRecord], golds: Sequence[Gold | None]) -> list[MetricSummary]:
    out = []
    for name in metric_names(rows):
        pairs = [(s, g) for r, g in zip(rows, golds, strict=True) if (s := r.score(name)) is not None]
        scores = [s for s, _ in pairs]
        ok = [(s, g) for s, g in pairs if s.ok]
        values = [s.value for s, _ in ok if s.value is not None]  # every one: ok means a value
        latency = [s.latency_ms for s in scores if s.latency_ms is not None]
        threshold = next((s.threshold for s in scores if s.threshold is not None), None)
        out.append(MetricSummary(
            name=name,
            higher_is_better=scores[0].higher_is_better,
            threshold=threshold,
            records=len(scores),
            errors=len(scores) - len(ok),
            flagged=sum(1 for s, _ in ok if s.hallucinated),
            mean=float(np.mean(values)) if values else None,
            mean_latency_ms=float(np.mean(latency)) if latency else None,
            histogram=histogram(values, [bool(s.hallucinated) for s, _ in ok], threshold),
            labelled=_against_labels([(s, g.label) for s, g in ok if g is not None and g.label is not None]),
        ))
    return out


def _against_labels(pairs: list) -> LabelledStats | None:
    if not pairs:
        return None
    labels = np.array([label for _, label in pairs])
    h = np.array([s.hallucination_score for s, _ in pairs])  # higher = more hallucinated, whatever the metric
    predicted = np.array([bool(s.hallucinated) for s, _ in pairs])
    return LabelledStats(len(pairs), int(labels.sum()), roc_plot(labels, h), reliability_plot(labels, h),
                         confusion(labels, predicted))


@dataclass(frozen=True)
class Slow:
    index: int
    id: str | None
    latency_ms: float
    slowest_metric: str


def total_latency_ms(row: ScoredRecord) -> float | None:
    """The time all metrics took on a record; None when none of them timed itself."""
    latencies = [s.latency_ms for s in row.scores if s.latency_ms is not None]
    return sum(latencies) if latencies else None


def slowest(rows: Sequence[ScoredRecord], count: int = 10) -> list[Slow]:
    """The records that took longest over all their metrics."""
    timed = []
    for index, row in enumerate(rows):
        total = total_latency_ms(row)
        if total is not None:
            slowest_metric = max((s for s in row.scores if s.latency_ms is not None), key=lambda s: s.latency_ms or 0.0)
            timed.append(Slow(index, row.id, total, slowest_metric.metric))
    return heapq.nlargest(count, timed, key=lambda s: s.latency_ms)


@dataclass(frozen=True)
class Failure:
    index: int
    id: str | None
    metric: str
    message: str


def failures(rows: Sequence[ScoredRecord]) -> list[Failure]:
    return [Failure(i, r.id, s.metric, s.error or "no value") for i, r in enumerate(rows) for s in r.scores if not s.ok]
