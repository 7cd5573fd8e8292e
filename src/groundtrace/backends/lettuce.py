"""LettuceDetect token classifiers through the ``lettucedetect`` package (the ``lettuce`` extra).

The package owns the prompt (its per-language templates) and the context chunking: when the prompt and the
answer exceed ``max_length`` tokens it groups whole passages into prompts that fit, reads the answer against
each, and takes each answer token's MAXIMUM P(hallucinated) over the chunks (a token unsupported in any chunk
is flagged; groundtrace's own ``grounding`` takes the minimum). This module calls those steps of
lettucedetect 0.2.3 (``TransformerDetector``: grouping, per-chunk tokens, spans from tokens) once per record,
so one forward pass per chunk yields both the token probabilities (for the answer's value) and the package's
spans, and maps the spans onto the answer as given: the package counts offsets from the first answer token,
so an answer with leading whitespace would come back shifted.

lettucedetect (and with it torch, transformers, scikit-learn, openai) is imported only when a model loads.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from groundtrace._extras import missing_extra
from groundtrace.backends.hub_models import HubModel, quiet_loading

EXTRA = "lettuce"
#: the package's recommended English model (its README's quick start)
DEFAULT_MODEL = "KRLabsOrg/lettucedect-base-modernbert-en-v1"
#: languages lettucedetect 0.2.3 has prompt templates for ("cn" is Chinese)
LANGUAGES = ("en", "de", "fr", "es", "it", "pl", "cn", "hu")
_ISO = {"zh": "cn"}  # groundtrace's language codes (ISO 639-1) where the package spells them otherwise
#: lettucedetect's default max_length (ModernBERT LettuceDetect models were trained at 4096 tokens)
DEFAULT_MAX_LENGTH = 4096


def lettuce_language(language: str | None, fallback: str | None) -> tuple[str | None, bool]:
    """(the package's language code for ``language``, whether it is the fallback); (None, True) when the
    language has no template and there is no fallback."""
    code = _ISO.get(language or "", language or "")
    if code in LANGUAGES:
        return code, False
    return (fallback, True) if fallback else (None, True)


@dataclass
class LettucePrediction:
    """One answer read by a LettuceDetect model."""

    p_hallucinated: np.ndarray  # per answer token, the maximum over the chunks
    offsets: list[tuple[int, int]]  # each token's [start, end) in the answer as given
    spans: list[dict[str, Any]]  # the package's spans (start, end, text, confidence[, category, ...]), mapped
    chunks: int
    context_truncated: bool
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Loaded:
    detector: Any  # lettucedetect TransformerDetector (English prompt)
    lock: threading.Lock
    per_language: dict[str, Any] = field(default_factory=dict)


class LettuceModel(HubModel[_Loaded]):
    """A LettuceDetect model, loaded on first use and shared by every metric of the process with the same
    model, device and options."""

    extra = EXTRA
    packages = ("lettucedetect", "torch", "transformers")
    what = "the lettuce metric (LettuceDetect)"
    metric = "lettuce"

    def __init__(self, model: str = DEFAULT_MODEL, *, max_length: int = DEFAULT_MAX_LENGTH,
                 taxonomy_head: str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self.max_length = int(max_length)
        if self.max_length < 16:
            raise ValueError(f"lettuce: max_length must be at least 16 tokens, got {max_length}")
        self.taxonomy_head = taxonomy_head

    def key(self) -> tuple[Any, ...]:
        return (*super().key(), self.max_length, self.taxonomy_head)

    def _create(self) -> _Loaded:
        source = self.source()
        device = self.torch_device()
        try:
            from lettucedetect.detectors.transformer import TransformerDetector
        except ImportError as error:
            raise missing_extra(EXTRA, self.what, error) from None
        with quiet_loading(source):
            detector = TransformerDetector(source.path, max_length=self.max_length, device=device, lang="en",
                                           taxonomy_head=self.taxonomy_head, **self.pretrained_options(source))
        return _Loaded(detector, threading.Lock(), {"en": detector})

    def _detector(self, loaded: _Loaded, lang: str) -> Any:
        # one model and tokenizer, a detector per prompt language (the package fixes it per detector)
        if lang not in loaded.per_language:
            twin = copy.copy(loaded.detector)
            twin.lang = lang
            loaded.per_language[lang] = twin
        return loaded.per_language[lang]

    def predict(self, contexts: list[str], answer: str, question: str | None, lang: str,
                min_confidence: float = 0.0) -> LettucePrediction:
        loaded = self.load()
        from lettucedetect.detectors.prompt_utils import PromptUtils

        with loaded.lock:  # a fast tokenizer is not safe to call from two threads at once
            detector = self._detector(loaded, lang)
            tokenizer = detector.tokenizer
            encoded = tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
            offsets = [(int(s), int(e)) for s, e in encoded["offset_mapping"]]
            if len(offsets) + 3 > self.max_length:
                raise ValueError(f"the answer has {len(offsets)} tokens: with max_length {self.max_length} the model "
                                 "cannot read it beside any context (raise max_length to the model's limit)")
            groups = detector._group_passages_into_chunks(contexts, question, answer)
            prompts = [PromptUtils.format_context(group, question, lang) for group in groups]
            budget = self.max_length - len(offsets) - 3
            truncated = any(len(tokenizer(p, add_special_tokens=False, verbose=False)["input_ids"]) > budget for p in prompts)
            if len(prompts) == 1:
                tokens = detector._predict_single(prompts[0], answer, output_format="tokens")
            else:
                tokens = detector._predict_chunked(prompts, answer, output_format="tokens")
            spans = detector._build_spans_from_tokens(tokens, prompts[0], answer)
            if detector.typer is not None and spans:
                spans = detector.typer.type_spans(answer, "\n".join(contexts), spans)
            spans = detector._filter_spans_by_confidence(spans, "spans", min_confidence)
        shift = offsets[0][0] if offsets else 0
        probabilities = np.array([float(t["prob"]) for t in tokens[:len(offsets)]], dtype=np.float64)
        mapped = []
        for span in spans:
            start, end = int(span["start"]) + shift, int(span["end"]) + shift
            mapped.append({**span, "start": start, "end": end, "text": answer[start:end]})
        return LettucePrediction(probabilities, offsets[:len(probabilities)], mapped, len(prompts), truncated)
