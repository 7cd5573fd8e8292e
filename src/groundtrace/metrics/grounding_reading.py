"""`grounding`'s reading of one answer: the detector's token probabilities, the claims' and the answer's value, the
unsupported spans and the reason (see metrics/grounding.py, which imports this with the first answer it scores)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from groundtrace.detector.aggregate import answer_probability, claim_probability
from groundtrace.detector.claims import Claim, split_claims
from groundtrace.detector.crossencoder import TokenScores
from groundtrace.metrics.base import Result
from groundtrace.metrics.fact_spans import ClaimRange, absent_facts, with_facts
from groundtrace.metrics import grounding as grounding_module
from groundtrace.score import Span
from groundtrace.text.facts import Fact

if TYPE_CHECKING:
    from groundtrace.metrics.grounding import GroundingMetric

# the card is read through its module, where a test (or a caller) may put another in its place


@dataclass(frozen=True)
class ClaimsRead:
    """The cross-encoder's reading of one answer: its claims and each claim's P(unsupported)."""

    claims: list[Claim]
    claim_p: list[float]
    scores: TokenScores
    words: np.ndarray
    evidence: dict


def read_claims(metric: GroundingMetric, answer: str, contexts: list[str], question: str | None, language: str,
                claims: list[Claim]) -> ClaimsRead:
    """The claims' P(unsupported) from the cross-encoder (training featurizes with this too)."""
    scores, evidence = metric.reading.read(metric.model, question, contexts, answer, language, claims,
                                           metric._embedder)
    words = scores.encoding.word_tokens(answer)
    noisy_or = grounding_module.model_card().get("aggregation") == grounding_module.NOISY_OR
    claim_p = [_claim_probability(scores, c, words, noisy_or) for c in claims]
    return ClaimsRead(claims, claim_p, scores, words, evidence)


def score_answer(metric: GroundingMetric, answer: str, contexts: list[str], question: str | None,
                 language: str) -> Result:
    """The metric's value, spans and details for one answer (its contexts non-empty after stripping, or none)."""
    claims = split_claims(answer, language)
    if not claims:
        return Result(0.0, "the answer has no claims to check", details={"claims": []})
    if not contexts:
        spans = [Span(start=c.start, end=c.end, text=c.text, label="unsupported", score=1.0) for c in claims]
        return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", spans,
                      {"claims": [_claim_detail(c, 1.0) for c in claims]})
    read = read_claims(metric, answer, contexts, question, language, claims)
    if metric.claims == "verdict":
        from groundtrace.metrics.grounding_verdict import verdict_result

        # spans read token probabilities: their threshold is the cross-encoder's, whatever the verdict's
        span_threshold = float(grounding_module.model_card().get("span_threshold", grounding_module.xe_threshold()))
        return verdict_result(metric, answer, contexts, language, read, span_threshold)
    claim_p, scores, words = read.claim_p, read.scores, read.words
    noisy_or = grounding_module.model_card().get("aggregation") == grounding_module.NOISY_OR
    value = answer_probability(claim_p) if noisy_or else max(claim_p)
    # spans read token probabilities: a card measured with another aggregation fits their threshold apart
    span_threshold = float(grounding_module.model_card().get("span_threshold", metric.threshold))
    spans = _spans(answer, scores, span_threshold, claims, words)
    absent = []
    if metric.fact_spans and value >= metric.threshold:
        ranges = [ClaimRange(c.start, c.end, p) for c, p in zip(claims, claim_p, strict=True)]
        absent = absent_facts(answer, contexts, language, ranges, span_threshold)
        spans = with_facts(answer, spans, absent)
    return Result(
        value=value,
        reason=_reason(value, claims, claim_p, spans, metric.threshold, span_threshold, [f for f, _ in absent]),
        spans=spans,
        details={
            "claims": [_claim_detail(c, p) for c, p in zip(claims, claim_p, strict=True)],
            "absent_facts": [{"text": f.text, "kind": f.kind, "start": f.start, "end": f.end} for f, _ in absent],
            "windows": scores.windows,
            "tokens": scores.tokens,
            "evidence": read.evidence,
            "model": grounding_module.model_card().get("xe_version", "grounding-2.1"),
        },
    )


def _in_claims(starts: np.ndarray, ends: np.ndarray, claims: list[Claim]) -> np.ndarray:
    inside = np.zeros(len(starts), dtype=bool)
    for c in claims:
        inside |= (starts < c.end) & (ends > c.start)
    return inside


def _claim_probability(scores: TokenScores, claim: Claim, words: np.ndarray, top_tokens: bool) -> float:
    enc = scores.encoding
    inside = (enc.starts < claim.end) & (enc.ends > claim.start) & words
    if not inside.any():
        return 0.0
    p = scores.p_unsupported[inside]
    return claim_probability(p) if top_tokens else float(p.max())


def _spans(answer: str, scores: TokenScores, threshold: float, claims: list[Claim], words: np.ndarray) -> list[Span]:
    enc, p = scores.encoding, scores.p_unsupported
    flagged = (p >= threshold) & _in_claims(enc.starts, enc.ends, claims) & words
    runs: list[list[int]] = []  # [start, end, first token, last token]
    for i in np.flatnonzero(flagged).tolist():
        s, e = int(enc.starts[i]), int(enc.ends[i])
        if runs and not answer[runs[-1][1]:s].strip():
            runs[-1][1], runs[-1][3] = max(runs[-1][1], e), i
        else:
            runs.append([s, e, i, i])
    spans: list[Span] = []
    for s, e, first, last in runs:
        while s > 0 and answer[s - 1].isalnum() and not _is_cjk(answer[s - 1]):
            s -= 1
        while e < len(answer) and answer[e].isalnum() and not _is_cjk(answer[e]):
            e += 1
        text = answer[s:e]
        lead, trail = len(text) - len(text.lstrip(" \t\n,;:")), len(text) - len(text.rstrip(" \t\n,;:"))
        s, e = s + lead, e - trail
        if e <= s:
            continue
        score = round(float(p[first:last + 1].max()), 4)
        if spans and s < spans[-1].end:  # widened to whole words, two runs can meet inside one word
            previous = spans.pop()
            s, score = previous.start, max(score, previous.score or 0.0)
            e = max(e, previous.end)
        spans.append(Span(start=s, end=e, text=answer[s:e], label="unsupported", score=score))
    return spans


def _is_cjk(ch: str) -> bool:
    return "\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af"


def _claim_detail(claim: Claim, p: float) -> dict:
    return {"start": claim.start, "end": claim.end, "p_unsupported": round(p, 4)}


def _reason(value: float, claims: list[Claim], claim_p: list[float], spans: list[Span], threshold: float,
            span_threshold: float, absent: Sequence[Fact] = ()) -> str:
    if value < threshold:
        return f"all {len(claims)} claims look supported by the contexts (highest P(unsupported) {value:.2f})"
    flagged = sum(p >= span_threshold for p in claim_p)
    if not spans:
        return (f"the {len(claims)} claims together look doubtful (P(unsupported) {value:.2f}), "
                "though no single phrase stands out")
    worst = max(spans, key=lambda s: s.score or 0.0)
    quoted = worst.text if len(worst.text) <= 120 else worst.text[:117] + "…"
    text = (f"{flagged} of {len(claims)} claims look unsupported by the contexts; "
            f"the least supported phrase (P={value:.2f}): \"{quoted}\"")
    if absent:
        shown = ", ".join(f"{f.text.rstrip(' .,;:')} ({f.kind})" for f in absent[:4]) + (" …" if len(absent) > 4 else "")
        text += f"; not in the contexts: {shown}"
    return text
