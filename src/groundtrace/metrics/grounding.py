"""`grounding`: the trained offline detector (no API, CPU only), the default metric without a judge.

A multilingual cross-encoder (multilingual-e5-small's first 6 layers, fine-tuned) reads the
question and contexts together with the answer and gives every answer token P(unsupported):

    claims   = the answer's sentences, long ones cut at clause joints (lead-ins, citations and
               refusals are not claims)
    read     = what each answer chunk is read against (detector/reading.py): every context window
               (evidence="all"), the sentences its claims pick ("select"), or the first while the
               full reading needs at most 2 windows per answer chunk and the second beyond ("auto",
               the default: a pile of 20 retrieved passages costs about what 5 do)
    p_t      = P(token t unsupported), the minimum over the windows that read it
    p_claim  = max of p_t over the claim's tokens that hold a letter or digit (or, where the model
               card says "aggregation": "claims-top3-noisy-or", the mean of its top 3)
    value    = max over the claims (or their noisy-OR)                  higher = more hallucinated
    spans    = runs of tokens with p_t >= the span threshold (the card's, else the verdict's),
               widened to whole words, and to each number, date, time or name of a flagged claim
               that the contexts do not state (metrics/fact_spans.py; option fact_spans=false: not)

The model card is docs/benchmarks/grounding-model-card.md; training is training/ (grounding-2: commit 582ff0f's training/build_crossencoder.sh).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from groundtrace.detector.aggregate import answer_probability, claim_probability
from groundtrace.detector.claims import Claim, split_claims
from groundtrace.detector.crossencoder import MODEL_DIR, CrossEncoder, TokenScores, shared_crossencoder
from groundtrace.detector.evidence import SentenceEmbedder
from groundtrace.detector.reading import DEFAULT_EVIDENCE, EvidenceMode, Reading
from groundtrace.metrics.base import Metric, Result, needed
from groundtrace.metrics.fact_spans import ClaimRange, absent_facts, with_facts
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.facts import Fact

CARD_FILE = MODEL_DIR / "grounding.json"
# How a model's card says its token probabilities become claims and a value: "max" (grounding-2: the
# highest token of the highest claim) unless the card names the aggregation it was measured with.
NOISY_OR = "claims-top3-noisy-or"


@lru_cache(maxsize=1)
def model_card() -> dict:
    return json.loads(CARD_FILE.read_text(encoding="utf-8"))


class GroundingMetric(Metric):
    name = "grounding"
    description = ("Trained offline cross-encoder: probability that the answer states something the contexts "
                   "do not support, with the unsupported spans.")
    requires = ("answer", "contexts")
    higher_is_better = False
    # The full reading reads every context window against every answer chunk (300,000 characters of
    # context is ~200 windows, several seconds), and selection tokenizes all of it; beyond that an
    # error Score says so.
    default_max_context_chars = 300_000
    default_threshold = 0.5  # never used: documented_threshold() is the model card's (fitted on ragtruth_qa_dev)

    @classmethod
    def documented_threshold(cls) -> float:
        return float(model_card()["threshold"])

    @classmethod
    def numerics(cls) -> tuple[float, list[str]]:
        stated = model_card()["numerics"]
        return float(stated["tolerance"]), [m["instruction_set"] for m in stated["measured"]]

    @property
    def trained_on(self) -> list[dict[str, str]]:
        """The files the shipped model was trained on, from its card (see groundtrace.measure.provenance): the bench
        marks its numbers on them as in-sample."""
        return list(model_card().get("trained_on", []))

    def __init__(self, *, threads: int = 1, model: CrossEncoder | None = None, evidence: EvidenceMode = DEFAULT_EVIDENCE,
                 embedder: str | None = None, fact_spans: bool = True, **options) -> None:
        reading = {k: _typed(getattr(Reading, k), options.pop(k)) for k in list(options) if k in Reading.__dataclass_fields__}
        super().__init__(**options)
        self.reading = Reading(evidence=evidence, **reading)
        self.model = model or shared_crossencoder(threads)
        self._embedder_spec = embedder
        self.fact_spans = _typed(True, fact_spans)

    def _embedder(self) -> SentenceEmbedder:
        from groundtrace.backends.embedders import get_embedder

        return get_embedder(self._embedder_spec or "use")

    def compute(self, record: Record, language: str) -> Result:
        answer = needed(record.answer)
        contexts = [c for c in needed(record.contexts) if c.strip()]
        claims = split_claims(answer, language)
        if not claims:
            return Result(0.0, "the answer has no claims to check", details={"claims": []})
        if not contexts:
            spans = [Span(start=c.start, end=c.end, text=c.text, label="unsupported", score=1.0) for c in claims]
            return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", spans,
                          {"claims": [_claim_detail(c, 1.0) for c in claims]})
        scores, evidence = self.reading.read(self.model, record.question, contexts, answer, language, claims,
                                             self._embedder)
        words = scores.encoding.word_tokens(answer)
        noisy_or = model_card().get("aggregation") == NOISY_OR
        claim_p = [_claim_probability(scores, c, words, noisy_or) for c in claims]
        value = answer_probability(claim_p) if noisy_or else max(claim_p)
        # spans read token probabilities: a card measured with another aggregation fits their threshold apart
        span_threshold = float(model_card().get("span_threshold", self.threshold))
        spans = _spans(answer, scores, span_threshold, claims, words)
        absent = []
        if self.fact_spans and value >= self.threshold:
            ranges = [ClaimRange(c.start, c.end, p) for c, p in zip(claims, claim_p, strict=True)]
            absent = absent_facts(answer, contexts, language, ranges, span_threshold)
            spans = with_facts(answer, spans, absent)
        return Result(
            value=value,
            reason=_reason(value, claims, claim_p, spans, self.threshold, span_threshold, [f for f, _ in absent]),
            spans=spans,
            details={
                "claims": [_claim_detail(c, p) for c, p in zip(claims, claim_p, strict=True)],
                "absent_facts": [{"text": f.text, "kind": f.kind, "start": f.start, "end": f.end} for f, _ in absent],
                "windows": scores.windows,
                "tokens": scores.tokens,
                "evidence": evidence,
                "model": model_card().get("version", "grounding"),
            },
        )


def _typed(default, value):
    """An option as its default's type: "2" -> 2 and "false" -> False, as -O and environment values come."""
    if isinstance(default, bool) and isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"grounding: expected true or false, got {value!r}")
        return value.lower() in ("true", "1")
    return type(default)(value) if isinstance(default, int | str) and not isinstance(default, bool) else bool(value)


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
