"""The geometry of the report's plots, in SVG pixels; the template draws it.

Numbers only leave this module, so all text that reaches the SVG passes through the template's
escaping. The curves themselves come from groundtrace.measure.classification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from groundtrace.measure.classification import reliability, roc_auc, roc_curve


@dataclass(frozen=True)
class Frame:
    """An SVG of ``width`` x ``height`` pixels whose plot area maps [0, 1] x [0, 1]."""

    width: int = 320
    height: int = 180
    left: int = 40
    right: int = 10
    top: int = 10
    bottom: int = 30

    def x(self, value: float) -> float:
        return round(self.left + value * (self.width - self.left - self.right), 2)

    def y(self, value: float) -> float:
        return round(self.top + (1.0 - value) * (self.height - self.top - self.bottom), 2)

    def polyline(self, points: Sequence[tuple[float, float]]) -> str:
        return " ".join(f"{self.x(a)},{self.y(b)}" for a, b in points)


SQUARE = Frame(width=240, height=240)


@dataclass(frozen=True)
class Bar:
    low: float
    high: float
    count: int
    flagged: int
    x: float
    width: float
    y: float  # top of the whole bar
    flagged_y: float  # top of its flagged part, drawn from the base


@dataclass
class Histogram:
    frame: Frame
    bars: list[Bar]
    top_count: int
    threshold_x: float | None


def histogram(values: Sequence[float], flagged: Sequence[bool], threshold: float | None, bins: int = 20) -> Histogram:
    """Counts of values in [0, 1], each bar split into the records its metric flagged and the rest."""
    frame = Frame()
    values_a = np.clip(np.asarray(values, dtype=float), 0.0, 1.0)
    flagged_a = np.asarray(flagged, dtype=bool)
    edges = np.linspace(0.0, 1.0, bins + 1)
    counts, _ = np.histogram(values_a, bins=edges)
    flagged_counts, _ = np.histogram(values_a[flagged_a], bins=edges)
    top = max(int(counts.max()) if len(counts) else 0, 1)
    bars = [
        Bar(float(lo), float(hi), int(n), int(f), frame.x(lo), round(frame.x(hi) - frame.x(lo) - 1, 2),
            frame.y(n / top), frame.y(f / top))
        for lo, hi, n, f in zip(edges[:-1], edges[1:], counts, flagged_counts, strict=True) if n
    ]
    marker = frame.x(threshold) if threshold is not None and 0.0 <= threshold <= 1.0 else None
    return Histogram(frame, bars, top, marker)


@dataclass
class Roc:
    frame: Frame
    points: str
    auc: float | None


def roc_plot(labels: ArrayLike, hallucination: ArrayLike) -> Roc | None:
    """The ROC curve of hallucination-oriented scores; None unless both classes are present."""
    y, h = np.asarray(labels, dtype=bool), np.asarray(hallucination, dtype=float)
    if y.all() or not y.any():
        return None
    return Roc(SQUARE, SQUARE.polyline(roc_curve(y, h)), roc_auc(y, h))


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    r: float
    n: int
    mean_score: float
    observed_rate: float


@dataclass
class Reliability:
    frame: Frame
    dots: list[Dot] = field(default_factory=list)
    line: str = ""


def reliability_plot(labels: ArrayLike, hallucination: ArrayLike, bins: int = 10) -> Reliability | None:
    """Observed hallucination rate against the mean score per bin; dot area grows with the bin's size."""
    y = np.asarray(labels)
    if not len(y):
        return None
    table = reliability(y, np.asarray(hallucination), bins)
    largest = max(b["n"] for b in table)
    dots = [Dot(SQUARE.x(b["mean_score"]), SQUARE.y(b["observed_rate"]), round(2.5 + 5.5 * (b["n"] / largest) ** 0.5, 2),
                b["n"], b["mean_score"], b["observed_rate"]) for b in table]
    return Reliability(SQUARE, dots, SQUARE.polyline([(b["mean_score"], b["observed_rate"]) for b in table]))
