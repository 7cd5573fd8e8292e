"""The fitted verdict file that the `combined` metric asks (written by `groundtrace fit`, groundtrace.combine):
which metrics it combines, how, at which threshold, and when it escalates.

A component's value enters as the log-odds of its hallucination-oriented value (higher = more likely
unsupported, clipped away from 0 and 1), standardized; a logistic model with one offset per language
it was fitted on turns them into the probability that the answer is unsupported. A component that
failed on a record enters as its mean in the fit (said in the reason). The file is JSON: readable,
diffable, and loading it runs no code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundtrace.errors import GroundtraceError

FORMAT = "groundtrace-verdict/1"
_EDGE = 1e-4  # a value of exactly 0 or 1 has infinite log-odds: clipped, as any calibrated model does


def log_odds(h: float) -> float:
    """The log-odds of a hallucination-oriented value in [0, 1]."""
    p = min(max(h, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


class VerdictFileError(GroundtraceError, ValueError):
    """A verdict file that cannot be used: says which file and what is wrong."""


@dataclass(frozen=True)
class Component:
    metric: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Contribution:
    metric: str
    value: float | None  # the component's hallucination-oriented value; None: it failed (its fit mean entered)
    weight: float  # what it added to the log-odds, against the fit's average record


@dataclass(frozen=True)
class LinearModel:
    """Logistic regression over standardized log-odds features, with per-language offsets."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    language_offsets: dict[str, float] = field(default_factory=dict)

    def log_odds(self, values: Mapping[str, float | None], language: str | None) -> tuple[float, list[Contribution]]:
        z = self.intercept + self.language_offsets.get(language or "", 0.0)
        parts = []
        for name, mean, scale, coef in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            value = values.get(name)
            x = mean if value is None else log_odds(value)
            weight = coef * (x - mean) / scale  # standardized: 0 for a value at the fit's mean
            z += weight
            parts.append(Contribution(name, value, weight))
        return z, parts

    def probability(self, values: Mapping[str, float | None], language: str | None) -> tuple[float, list[Contribution]]:
        z, parts = self.log_odds(values, language)
        return sigmoid(z), parts


@dataclass(frozen=True)
class Cascade:
    """Records whose combined probability lies in [low, high) are sent to ``metric`` (a judge, a Hub
    detector) and decided by ``model``, which reads its value beside the cheap ones."""

    metric: str
    low: float
    high: float
    model: LinearModel
    options: dict[str, Any] = field(default_factory=dict)
    share: float | None = None  # the share of the fit's records that fell in the band

    def covers(self, probability: float) -> bool:
        return self.low <= probability < self.high


@dataclass(frozen=True)
class VerdictModel:
    components: list[Component]
    model: LinearModel
    threshold: float
    target: str = "f1"
    cascade: Cascade | None = None
    fitted: dict[str, Any] = field(default_factory=dict)  # what it was fitted on: records, labels, file hash
    report: dict[str, Any] = field(default_factory=dict)  # the cross-validated figures `fit` printed

    @property
    def metric_names(self) -> list[str]:
        return [c.metric for c in self.components]

    # ------------------------------------------------------------------------------ the file
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> VerdictModel:
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise VerdictFileError(f"verdict file {path} does not exist (write one with `groundtrace fit`)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise VerdictFileError(f"verdict file {path} is not readable JSON: {error}") from None
        try:
            return cls.from_dict(raw)
        except (KeyError, TypeError, ValueError) as error:
            raise VerdictFileError(f"verdict file {path} is not a verdict written by `groundtrace fit`: {error}") from None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VerdictModel:
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT!r}")
        model = _linear(raw["model"])
        components = [Component(c["metric"], dict(c.get("options") or {})) for c in raw["components"]]
        if [c.metric for c in components] != model.features:
            raise ValueError("its components and its model's features differ")
        cascade = raw.get("cascade")
        threshold = float(raw["threshold"])
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold {threshold} is not in [0, 1]")
        return cls(
            components=components, model=model, threshold=threshold, target=str(raw.get("target", "f1")),
            cascade=None if cascade is None else Cascade(
                metric=cascade["metric"], low=float(cascade["low"]), high=float(cascade["high"]),
                model=_linear(cascade["model"]), options=dict(cascade.get("options") or {}), share=cascade.get("share")),
            fitted=dict(raw.get("fitted") or {}), report=dict(raw.get("report") or {}),
        )


def _linear(raw: Mapping[str, Any]) -> LinearModel:
    model = LinearModel(features=[str(f) for f in raw["features"]], mean=_floats(raw["mean"]), scale=_floats(raw["scale"]),
                        coef=_floats(raw["coef"]), intercept=float(raw["intercept"]),
                        language_offsets={str(k): float(v) for k, v in (raw.get("language_offsets") or {}).items()})
    n = len(model.features)
    if not n or not len(model.mean) == len(model.scale) == len(model.coef) == n:
        raise ValueError("a model needs one mean, scale and coefficient per feature")
    if any(s <= 0 for s in model.scale):
        raise ValueError("a feature scale must be positive")
    return model


def _floats(values: Sequence[Any]) -> list[float]:
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        raise ValueError("a number in the model is not finite")
    return out
