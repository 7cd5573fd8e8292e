"""`lettuce`: LettuceDetect (a ModernBERT token classifier trained on RAGTruth) as a groundtrace metric.

Needs the ``lettuce`` extra and a LettuceDetect model: a Hub id (default: the package's recommended English
model, KRLabsOrg/lettucedect-base-modernbert-en-v1) or a folder. The lettucedetect package formats the prompt
(question, passages) and splits long contexts into chunks; see groundtrace.backends.lettuce.

    p_t      = P(token t hallucinated), the MAXIMUM over the context chunks (lettucedetect's rule: a token
               unsupported in any chunk counts; `grounding` takes the minimum over its windows)
    value    = max of p_t over the answer's tokens                          higher = more hallucinated
    spans    = lettucedetect's own spans (runs of tokens it labels hallucinated, i.e. p_t >= 0.5), with their
               highest p_t as the score and, when a taxonomy head types them, the category as the label
    verdict  = value >= threshold (default 0.5, lettucedetect's token decision: flagged exactly when it
               returns a span; not calibrated by groundtrace)

Options (``-O lettuce.KEY=VALUE``): model, max_length (4096), lang (a fixed prompt language; default: the
record's), fallback_lang ("en": the prompt for languages lettucedetect has no template for, Russian among
them; "" gives those records an error Score instead), device ("cpu"), threshold, min_confidence (drop spans
below it), taxonomy_head (a lettucedetect typing head), trust_remote_code, local_files_only, revision.
"""

from __future__ import annotations

from typing import Any

from groundtrace.backends.lettuce import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_MODEL,
    LANGUAGES,
    LettuceModel,
    LettucePrediction,
    lettuce_language,
)
from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.hub import HubModelMetric
from groundtrace.record import Record
from groundtrace.score import Span


class LettuceMetric(HubModelMetric):
    name = "lettuce"
    description = ("LettuceDetect (lettucedetect package, a Hub model or folder): the highest token P(hallucinated), "
                   "with the package's spans. Extra: groundtrace[lettuce].")
    requires = ("answer", "contexts")
    higher_is_better = False
    default_threshold = 0.5  # the package's own token decision (argmax of 2 labels), not calibrated here
    default_max_context_chars = 300_000
    backend: LettuceModel

    def __init__(self, *, model: str = DEFAULT_MODEL, max_length: int = DEFAULT_MAX_LENGTH, lang: str | None = None,
                 fallback_lang: str | None = "en", device: str = "cpu", min_confidence: float = 0.0,
                 taxonomy_head: str | None = None, trust_remote_code: bool = False, local_files_only: bool = False,
                 revision: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        for option, value in (("lang", lang), ("fallback_lang", fallback_lang)):
            if value and value not in LANGUAGES:
                raise ValueError(f"lettuce: {option}={value!r} is not a language lettucedetect has a prompt for "
                                 f"({', '.join(LANGUAGES)}; cn is Chinese)")
        if not 0.0 <= float(min_confidence) <= 1.0:
            raise ValueError(f"lettuce: min_confidence must lie in [0, 1], got {min_confidence}")
        self.lang = lang or None
        self.fallback_lang = fallback_lang or None
        self.min_confidence = float(min_confidence)
        self.backend = LettuceModel(model, max_length=max_length, device=device, taxonomy_head=taxonomy_head,
                                    trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                                    revision=revision)

    def compute(self, record: Record, language: str) -> Result:
        answer = needed(record.answer)
        contexts = [c for c in needed(record.contexts) if c.strip()]
        lang, fell_back = (self.lang, False) if self.lang else lettuce_language(language, self.fallback_lang)
        if lang is None:
            raise ValueError(f"lettucedetect has no prompt for language '{language}' and fallback_lang is off "
                             f"(it has {', '.join(LANGUAGES)})")
        if not contexts:
            span = Span(start=0, end=len(answer), text=answer, label="unsupported", score=1.0)
            return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", [span],
                          {"model": self.backend.model})
        found = self.backend.predict(contexts, answer, record.question, lang, self.min_confidence)
        value, worst = _highest(found)
        spans = [_span(s) for s in found.spans]
        details: dict[str, Any] = {
            "model": self.backend.model, "lang": lang, "chunks": found.chunks, "answer_tokens": len(found.offsets),
            "token_max": None if worst is None else {"start": worst[0], "end": worst[1], "p": round(value, 4)},
        }
        if fell_back:
            details["lang_fallback"] = f"no lettucedetect prompt for '{language}': the '{lang}' prompt was used"
        if found.context_truncated:
            details["context_truncated"] = True
        return Result(value, _reason(value, spans, self.threshold, found), spans, details)


def _highest(found: LettucePrediction) -> tuple[float, tuple[int, int] | None]:
    """The highest token probability, and where that token is (tokens without characters left out)."""
    best, where = 0.0, None
    for p, (start, end) in zip(found.p_hallucinated.tolist(), found.offsets, strict=True):
        if end > start and (where is None or p > best):
            best, where = float(p), (start, end)
    return best, where


def _span(found: dict[str, Any]) -> Span:
    label = found.get("category") or "unsupported"
    return Span(start=found["start"], end=found["end"], text=found["text"], label=str(label),
                score=round(min(max(float(found.get("confidence", 0.0)), 0.0), 1.0), 4))


def _reason(value: float, spans: list[Span], threshold: float, found: LettucePrediction) -> str:
    cut = " (the context was longer than max_length allows and was cut)" if found.context_truncated else ""
    if value < threshold:
        return f"LettuceDetect finds every answer token supported (highest P(hallucinated) {value:.2f}){cut}"
    if not spans:
        return f"LettuceDetect's highest token P(hallucinated) is {value:.2f}, though it marks no span{cut}"
    worst = max(spans, key=lambda s: s.score or 0.0)
    quoted = worst.text if len(worst.text) <= 120 else worst.text[:117] + "…"
    return (f"LettuceDetect marks {len(spans)} span{'s' if len(spans) != 1 else ''} as unsupported; the strongest "
            f"(P={worst.score:.2f}): \"{quoted}\"{cut}")
