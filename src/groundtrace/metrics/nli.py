"""`nli`: any entailment / consistency classifier of the Hugging Face Hub, claim by claim.

Needs the ``transformers`` extra and a sequence-classification model (default: the multilingual
MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7; MiniCheck-RoBERTa/DeBERTa; HHEM-2.1-open with
``trust_remote_code=true``). See groundtrace.backends.nli for how P(entailment) is read.

    claims      = the answer's claims (groundtrace's claim splitter, as `grounding` uses)
    chunks      = the contexts' sentences packed in order into chunks of at most chunk_tokens tokens of the
                  model's tokenizer (default 400); each chunk repeats the last overlap_sentences sentences of
                  the one before (default 1); a context that fits is one chunk with its neighbours
    support(c)  = max over the chunks of P(chunk entails claim c)   (premise = chunk, hypothesis = claim)
    value       = 1 - min over claims of support                    higher = more hallucinated
                  (aggregation="mean": 1 - the mean support)
    spans       = the claims with 1 - support >= threshold, scored 1 - support
    verdict     = value >= threshold (default 0.5: not calibrated by groundtrace; fit one with
                  `groundtrace bench --threshold-from`)

Options (``-O nli.KEY=VALUE``): model, entailment_label (name or index, where config.id2label does not say),
chunk_tokens, overlap_sentences, aggregation (min, mean), batch_size (pairs per forward pass, 16), max_length
(tokens per pair; default the tokenizer's, at most 512), device ("cpu"), threshold, trust_remote_code,
local_files_only, revision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from groundtrace.backends.nli import DEFAULT_MODEL, EntailmentModel
from groundtrace.detector.claims import Claim, split_claims
from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.hub import HubModelMetric
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.sentences import split_sentences

AGGREGATIONS = ("min", "mean")


class NLIMetric(HubModelMetric):
    name = "nli"
    description = ("An entailment / consistency model of the Hugging Face Hub (or a folder) reads each claim "
                   "against the contexts: 1 - the least supported claim's P(entailment). Extra: groundtrace[transformers].")
    requires = ("answer", "contexts")
    higher_is_better = False
    default_threshold = 0.5  # not calibrated: the models' own decision point for P(entailment)
    default_max_context_chars = 300_000
    backend: EntailmentModel

    def __init__(self, *, model: str = DEFAULT_MODEL, entailment_label: str | int | None = None, chunk_tokens: int = 400,
                 overlap_sentences: int = 1, aggregation: str = "min", batch_size: int = 16,
                 max_length: int | None = None, device: str = "cpu", trust_remote_code: bool = False,
                 local_files_only: bool = False, revision: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"nli: aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
        if int(chunk_tokens) < 8 or int(overlap_sentences) < 0:
            raise ValueError(f"nli: chunk_tokens must be at least 8 and overlap_sentences at least 0, got "
                             f"{chunk_tokens} and {overlap_sentences}")
        self.chunk_tokens = int(chunk_tokens)
        self.overlap_sentences = int(overlap_sentences)
        self.aggregation = aggregation
        self.backend = EntailmentModel(model, device=device, max_length=max_length, batch_size=batch_size,
                                       entailment_label=entailment_label, trust_remote_code=trust_remote_code,
                                       local_files_only=local_files_only, revision=revision)

    def compute(self, record: Record, language: str) -> Result:
        answer = needed(record.answer)
        contexts = [c for c in needed(record.contexts) if c.strip()]
        claims = split_claims(answer, language)
        if not claims:
            return Result(0.0, "the answer has no claims to check", details={"claims": [], "model": self.backend.model})
        if not contexts:
            spans = [Span(start=c.start, end=c.end, text=c.text, label="unsupported", score=1.0) for c in claims]
            return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", spans,
                          {"claims": [_claim_detail(c, 0.0, None) for c in claims], "model": self.backend.model})
        # leave room for the claim and the special tokens in each pair
        size = max(8, min(self.chunk_tokens, self.backend.token_limit - 64))
        chunks = context_chunks(contexts, self.backend.count_tokens, size, self.overlap_sentences)
        p = self.backend.entailment([(chunk, claim.text) for claim in claims for chunk in chunks])
        p = p.reshape(len(claims), len(chunks))
        support, best = p.max(axis=1), p.argmax(axis=1)
        value = 1.0 - (float(support.min()) if self.aggregation == "min" else float(support.mean()))
        spans = [Span(start=c.start, end=c.end, text=c.text, label="unsupported", score=round(1.0 - float(s), 4))
                 for c, s in zip(claims, support, strict=True) if 1.0 - float(s) >= self.threshold]
        return Result(value, _reason(value, claims, support, spans, self.threshold), spans, {
            "claims": [_claim_detail(c, float(s), int(b)) for c, s, b in zip(claims, support, best, strict=True)],
            "chunks": len(chunks), "pairs": int(p.size), "aggregation": self.aggregation, "model": self.backend.model,
        })


def context_chunks(contexts: list[str], count_tokens: Any, size: int, overlap: int) -> list[str]:
    """The contexts' sentences, in order, packed into chunks of at most ``size`` tokens (a longer sentence is
    a chunk of its own, which the model truncates); each chunk repeats the last ``overlap`` sentences of the
    one before. Sentences of one context are joined by a space, contexts by a line break."""
    units = [(s.text, i) for i, context in enumerate(contexts) for s in split_sentences(context)]
    if not units:
        return []
    lengths = count_tokens([text for text, _ in units])
    chunks: list[list[int]] = []
    current: list[int] = []
    used = 0
    for k, n in enumerate(lengths):
        if current and used + n + 1 > size:
            chunks.append(current)
            current = current[-overlap:] if overlap else []
            used = sum(lengths[j] + 1 for j in current)
            if current and used + n + 1 > size:  # the overlap alone leaves no room: start afresh
                current, used = [], 0
        current.append(k)
        used += n + 1
    chunks.append(current)
    return [_join([units[j] for j in chunk]) for chunk in chunks]


def _join(units: list[tuple[str, int]]) -> str:
    text = units[0][0]
    for (piece, context), (_, before) in zip(units[1:], units[:-1], strict=True):
        text += ("\n" if context != before else " ") + piece
    return text


def _claim_detail(claim: Claim, support: float, chunk: int | None) -> dict[str, Any]:
    return {"start": claim.start, "end": claim.end, "support": round(support, 4), "chunk": chunk}


def _reason(value: float, claims: list[Claim], support: np.ndarray, spans: list[Span], threshold: float) -> str:
    if value < threshold:
        return f"all {len(claims)} claims are entailed by the contexts (least support {float(support.min()):.2f})"
    if not spans:
        return (f"the {len(claims)} claims are supported {float(support.mean()):.2f} on average, below what the "
                "threshold asks, though no single claim is")
    worst = claims[int(support.argmin())]
    quoted = worst.text if len(worst.text) <= 120 else worst.text[:117] + "…"
    return (f"{len(spans)} of {len(claims)} claims are not entailed by the contexts; the least supported "
            f"(P(entailment)={float(support.min()):.2f}): \"{quoted}\"")
