"""grounding-5's verdict on one claim: a logistic model over its features (detector/claim_features.py), with
the weights the model card holds (grounding.json, "claim_verdict"; fitted by training/claim_verdict.py).

    z       = intercept + offset[language] + sum_f coef_f * (x_f - mean_f) / scale_f
    p_claim = 1 / (1 + exp(-z))                      P(the claim is unsupported), calibrated
    value   = max over the answer's claims of p_claim

Everything is float64 numpy on a handful of numbers: the value differs between CPUs only as much as the
cross-encoder's P(unsupported) does (the card's tolerance), scaled by at most coef_xe / (4 * scale_xe).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimVerdict:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    language_offsets: Mapping[str, float]

    @classmethod
    def from_card(cls, card: Mapping) -> ClaimVerdict:
        v = card["claim_verdict"]
        n = len(v["features"])
        if not (len(v["mean"]) == len(v["scale"]) == len(v["coef"]) == n):
            raise ValueError("grounding: the model card's claim_verdict has features, mean, scale and coef of "
                             "different lengths")
        return cls(tuple(v["features"]), tuple(map(float, v["mean"])), tuple(map(float, v["scale"])),
                   tuple(map(float, v["coef"])), float(v["intercept"]), dict(v.get("language_offsets", {})))

    def logit(self, values: Mapping[str, float], language: str) -> float:
        z = self.intercept + float(self.language_offsets.get(language, 0.0))
        for name, mean, scale, coef in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            z += coef * (float(values[name]) - mean) / scale
        return z

    def probability(self, values: Mapping[str, float], language: str) -> float:
        z = self.logit(values, language)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def contributions(self, values: Mapping[str, float]) -> dict[str, float]:
        """Each feature's share of the logit: what made a claim's verdict (details of the Score)."""
        return {name: round(coef * (float(values[name]) - mean) / scale, 4)
                for name, mean, scale, coef in zip(self.features, self.mean, self.scale, self.coef, strict=True)}

    def xe_sensitivity(self) -> float:
        """The largest change of p_claim per unit of the cross-encoder's P(unsupported)."""
        i = self.features.index("xe")
        return abs(self.coef[i]) / self.scale[i] / 4.0


def answer_value(claim_p: Sequence[float]) -> float:
    return max(claim_p) if claim_p else 0.0
