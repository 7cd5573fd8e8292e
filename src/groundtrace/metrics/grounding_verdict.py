"""grounding-5's Result for one answer: each claim's calibrated verdict (detector/claim_verdict.py over
detector/claim_features.py), the answer's value the highest of them, a reason that names the claim and what is
wrong with it ("the contexts say 1978; the answer says 1987"), and spans only inside flagged claims: the wrong
fact, the cross-encoder's unsupported words, facts the contexts do not state, else the claim itself."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from groundtrace.detector.claim_features import ClaimFeatures, claim_features
from groundtrace.detector.claim_verdict import ClaimVerdict, answer_value
from groundtrace.detector.claims import Claim
from groundtrace.metrics import grounding as grounding_module
from groundtrace.metrics.base import Result
from groundtrace.metrics.fact_spans import ClaimRange, absent_facts, with_facts
from groundtrace.metrics.grounding import GroundingMetric
from groundtrace.metrics.grounding_reading import ClaimsRead, _spans
from groundtrace.score import Span
from groundtrace.text.conflicts import FactCheck
from groundtrace.text.facts import Fact

_QUOTE = 120


@lru_cache(maxsize=4)
def _verdict(card_id: int) -> ClaimVerdict:  # keyed by the card object: a test may put another card in place
    return ClaimVerdict.from_card(grounding_module.model_card())


def verdict_result(metric: GroundingMetric, answer: str, contexts: list[str], language: str, read: ClaimsRead,
                   span_threshold: float) -> Result:
    verdict = _verdict(id(grounding_module.model_card()))
    claims = read.claims
    features = claim_features(claims, read.claim_p, contexts, language)
    claim_p = [verdict.probability(f.values, language) for f in features]
    value = answer_value(claim_p)
    flagged = [i for i, p in enumerate(claim_p) if p >= metric.threshold]
    spans = _claim_spans(metric, answer, contexts, language, read, span_threshold, features, claim_p, flagged)
    return Result(
        value=value,
        reason=_reason(value, claims, claim_p, features, flagged, metric.threshold),
        spans=spans,
        details={
            "claims": [_detail(c, p, x, f, verdict) for c, p, x, f in zip(claims, claim_p, read.claim_p, features,
                                                                          strict=True)],
            "windows": read.scores.windows,
            "tokens": read.scores.tokens,
            "evidence": read.evidence,
            "model": grounding_module.model_card().get("version", "grounding"),
        },
    )


def _claim_spans(metric: GroundingMetric, answer: str, contexts: list[str], language: str, read: ClaimsRead,
                 span_threshold: float, features: list[ClaimFeatures], claim_p: list[float],
                 flagged: list[int]) -> list[Span]:
    if not flagged:
        return []
    claims = [read.claims[i] for i in flagged]
    spans = _spans(answer, read.scores, span_threshold, claims, read.words)
    wrong = [(_in_answer(check, read.claims[i]), claim_p[i]) for i in flagged for check in features[i].conflicts]
    spans = with_facts(answer, spans, wrong)
    if metric.fact_spans:
        ranges = [ClaimRange(c.start, c.end, claim_p[i]) for i, c in zip(flagged, claims, strict=True)]
        spans = with_facts(answer, spans, absent_facts(answer, contexts, language, ranges, metric.threshold))
    for i, claim in zip(flagged, claims, strict=True):  # a flagged claim with nothing marked: the claim is the span
        if not any(claim.start <= s.start < claim.end for s in spans):
            spans.append(Span(start=claim.start, end=claim.end, text=claim.text, label="unsupported",
                              score=round(claim_p[i], 4)))
    return sorted(spans, key=lambda s: s.start)


def _in_answer(check: FactCheck, claim: Claim) -> Fact:
    """The claim's fact, its offsets moved from the claim into the answer."""
    return replace(check.fact, start=claim.start + check.fact.start, end=claim.start + check.fact.end)


def _reason(value: float, claims: list[Claim], claim_p: list[float], features: list[ClaimFeatures],
            flagged: list[int], threshold: float) -> str:
    if not flagged:
        return f"all {len(claims)} claims look supported by the contexts (highest P(unsupported) {value:.2f})"
    worst = max(flagged, key=lambda i: claim_p[i])
    text = claims[worst].text.strip()
    quoted = text if len(text) <= _QUOTE else text[: _QUOTE - 3] + "…"
    why = _why(features[worst])
    head = f"{len(flagged)} of {len(claims)} claims look unsupported by the contexts"
    return f"{head}; the least supported (P={claim_p[worst]:.2f}): \"{quoted}\"" + (f" — {why}" if why else "")


def _why(features: ClaimFeatures) -> str:
    if features.conflicts:
        return "; ".join(c.reason for c in features.conflicts[:2])
    if features.absent:
        shown = ", ".join(c.fact.text.rstrip(" .,;:") for c in features.absent[:3])
        return f"the contexts do not state {shown}"
    v = features.values
    if v["uncovered"] >= 0.5:
        return f"{round(100 * v['uncovered'])}% of its content words are in no context"
    if v["dropped_condition"]:
        return "its closest context sentence states a condition the claim leaves out"
    if v["negation"]:
        return "its closest context sentence and the claim differ in negation"
    return ""


def _detail(claim: Claim, p: float, xe: float, features: ClaimFeatures, verdict: ClaimVerdict) -> dict:
    out = {"start": claim.start, "end": claim.end, "p_unsupported": round(p, 4), "p_xe": round(xe, 4),
           "contributions": verdict.contributions(features.values)}
    if features.conflicts:
        out["conflicts"] = [{"rule": c.rule, "reason": c.reason} for c in features.conflicts]
    return out
