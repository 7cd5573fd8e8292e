"""`grounding`: the trained offline detector (no API, CPU only), the default metric without a judge.

    claims   = the answer's sentences, long ones cut at clause joints
    p_i      = network(features of claim i against the context sentences)     P(claim i unsupported)
    value    = max_i p_i                                                       higher = more hallucinated
    spans    = every claim with p_i >= threshold; where such a claim is otherwise covered by the
               contexts and only its numbers, dates or names are absent, just those facts

The model card is docs/grounding-model-card.md; training is training/train_detector.py.
"""

from __future__ import annotations

from groundtrace.backends.embedders import Embedder, USEEmbedder
from groundtrace.detector.features import (
    FEATURE_NAMES,
    Claim,
    ContextView,
    clear_context_views,
    claim_features,
    context_view,
    split_claims,
)
from groundtrace.detector.model import DetectorModel, shared_model
from groundtrace.metrics.base import Metric, Result
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.facts import extract_facts

_COVERAGE = FEATURE_NAMES.index("term_coverage")
# A flagged claim whose words the contexts cover this well is wrong in its facts, not as a whole.
_FACT_ONLY_COVERAGE = 0.75
_shared_embedders: dict[int, USEEmbedder] = {}


def _embedder(threads: int) -> USEEmbedder:
    # The model was trained on USE features: no other embedder may stand in.
    return _shared_embedders.setdefault(threads, USEEmbedder(threads=threads))


class GroundingMetric(Metric):
    name = "grounding"
    description = "Trained offline detector: probability that the answer states something the contexts do not support, with the unsupported spans."
    requires = ("answer", "contexts")
    higher_is_better = False
    default_threshold = 0.5  # replaced by the model card's threshold (fitted on synthetic validation data)

    def __init__(self, *, threads: int = 1, model: DetectorModel | None = None, embedder: Embedder | None = None, **options) -> None:
        self.model = model or shared_model(threads)
        if options.get("threshold") is None:
            options["threshold"] = self.model.threshold
        super().__init__(**options)
        self._embedder = embedder or _embedder(threads)

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def reset_caches(self) -> None:
        clear_context_views()

    def compute(self, record: Record, language: str) -> Result:
        contexts = [c for c in record.contexts if c.strip()]
        claims = split_claims(record.answer, language)
        if not claims:
            return Result(0.0, "the answer has no words to check", details={"claims": []})
        if not contexts:
            spans = [Span(start=c.start, end=c.end, text=c.text, label="unsupported", score=1.0) for c in claims]
            return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", spans,
                          {"claims": [_claim_detail(c, 1.0) for c in claims]})
        view = context_view(contexts, language, self._embedder)
        features = claim_features(claims, record.question or "", view, language, self._embedder)
        probabilities = self.model.predict(features)
        flagged = [(c, float(p), f) for c, p, f in zip(claims, probabilities, features) if p >= self.threshold]
        spans = [span for claim, p, f in flagged for span in self._spans(claim, p, f, view, language)]
        value = float(probabilities.max())
        return Result(
            value=value,
            reason=_reason(value, claims, flagged),
            spans=spans,
            details={
                "claims": [_claim_detail(c, float(p)) for c, p in zip(claims, probabilities)],
                "context_sentences": len(view.sentences),
                "model": self.model.card.get("version", self.model.path.name),
            },
        )

    def _spans(self, claim: Claim, p: float, features, view: ContextView, language: str) -> list[Span]:
        if features[_COVERAGE] >= _FACT_ONLY_COVERAGE:
            absent = [f for f in extract_facts(claim.text, language) if not view.facts.supports(f)]
            if absent:
                return [
                    Span(start=claim.start + f.start, end=claim.start + f.end, text=f.text,
                         label=f"unsupported {f.kind}", score=round(p, 4))
                    for f in absent
                ]
        return [Span(start=claim.start, end=claim.end, text=claim.text, label="unsupported", score=round(p, 4))]


def _claim_detail(claim: Claim, p: float) -> dict:
    return {"start": claim.start, "end": claim.end, "p_unsupported": round(p, 4)}


def _reason(value: float, claims: list[Claim], flagged: list[tuple[Claim, float, object]]) -> str:
    if not flagged:
        return f"all {len(claims)} claims look supported by the contexts (highest P(unsupported) {value:.2f})"
    worst = max(flagged, key=lambda item: item[1])
    quoted = worst[0].text if len(worst[0].text) <= 120 else worst[0].text[:117] + "…"
    return (
        f"{len(flagged)} of {len(claims)} claims look unsupported by the contexts; "
        f"the least supported (P={worst[1]:.2f}): \"{quoted}\""
    )
