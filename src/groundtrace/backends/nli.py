"""Entailment / consistency classifiers of the Hugging Face Hub (the ``transformers`` extra): any
``AutoModelForSequenceClassification`` that reads (premise, hypothesis) and has a label meaning "the premise
supports the hypothesis" (MiniCheck-RoBERTa/DeBERTa, mDeBERTa-v3 XNLI, ...).

P(entailment) is the softmax probability of that label (a one-logit model: the sigmoid of its logit). The
label is found by name in ``config.id2label`` (entailment, entailed, supported, consistent, ...) or given by
the user (``entailment_label``: a name or an index). A model whose own code offers ``predict(pairs)``
(HHEM-2.1-open, loaded only with ``trust_remote_code``) is asked through it: its output is P(consistent).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundtrace._extras import ModelUnavailableError, missing_extra
from groundtrace.backends.hub_models import HubModel, quiet_loading

EXTRA = "transformers"
#: multilingual (ru, zh, en and ~100 more) 3-label NLI: entailment / neutral / contradiction
DEFAULT_MODEL = "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7"
#: label names (lower case, "-" and " " read as "_") that mean "the premise supports the hypothesis"
ENTAILMENT_NAMES = frozenset({"entailment", "entailed", "entails", "entail", "supported", "supports", "support",
                              "consistent", "factual", "faithful", "grounded"})


def entailment_index(id2label: Mapping[Any, str], chosen: str | int | None, model: str) -> int:
    """The class index that means entailment: ``chosen`` (a name or an index) or the one entailment-like name."""
    labels = {int(i): str(name) for i, name in id2label.items()}
    if chosen is not None and str(chosen).strip() != "":
        text = str(chosen).strip()
        if text.lstrip("-").isdigit() and int(text) in labels:
            return int(text)
        named = [i for i, name in labels.items() if name.lower() == text.lower()]
        if named:
            return named[0]
        raise ModelUnavailableError(f"model '{model}' has no label {chosen!r}: its labels are {labels}")
    found = [i for i, name in labels.items() if name.strip().lower().replace("-", "_").replace(" ", "_") in ENTAILMENT_NAMES]
    if len(found) == 1:
        return found[0]
    raise ModelUnavailableError(
        f"cannot tell which label of model '{model}' means that the premise supports the hypothesis (its labels: "
        f"{labels}): pass the option entailment_label=NAME or INDEX (MiniCheck's RoBERTa and DeBERTa: 1)")


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any  # None for a model that tokenizes inside its own predict()
    index: int | None  # None: the model's own predict() gives P(consistent)
    device: Any
    max_length: int
    lock: threading.Lock


class EntailmentModel(HubModel[_Loaded]):
    """A sequence classifier asked P(premise entails hypothesis), loaded on first use and shared by every
    metric of the process with the same model, device and options."""

    extra = EXTRA
    packages = ("torch", "transformers")
    what = "the nli metric"
    metric = "nli"

    def __init__(self, model: str = DEFAULT_MODEL, *, max_length: int | None = None, batch_size: int = 16,
                 entailment_label: str | int | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self.max_length = None if max_length is None else int(max_length)
        if self.max_length is not None and self.max_length < 16:
            raise ValueError(f"nli: max_length must be at least 16 tokens, got {max_length}")
        self.batch_size = max(1, int(batch_size))
        self.entailment_label = entailment_label

    def key(self) -> tuple[Any, ...]:
        return (*super().key(), self.max_length, str(self.entailment_label))

    def _create(self) -> _Loaded:
        source = self.source()
        device = self.torch_device()
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as error:
            raise missing_extra(EXTRA, self.what, error) from None
        options = self.pretrained_options(source)
        with quiet_loading(source):
            model = AutoModelForSequenceClassification.from_pretrained(source.path, **options).to(device).eval()
            own_predict = self.trust_remote_code and callable(getattr(model, "predict", None))
            try:
                tokenizer = AutoTokenizer.from_pretrained(source.path, **options)
            except (OSError, ValueError):
                if not own_predict:
                    raise
                tokenizer = None  # HHEM-2.1-open: its predict() brings its own tokenizer
        index = None if own_predict else entailment_index(model.config.id2label, self.entailment_label, self.model)
        limit = self.max_length or min(int(getattr(tokenizer, "model_max_length", 512) or 512), 512)
        return _Loaded(model, tokenizer, index, device, limit, threading.Lock())

    @property
    def token_limit(self) -> int:
        """How many tokens one (premise, hypothesis) pair may have."""
        return self.load().max_length

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text (words, for a model without a tokenizer of its own here)."""
        loaded = self.load()
        if not texts:
            return []
        if loaded.tokenizer is None:
            return [len(text.split()) for text in texts]
        with loaded.lock:
            ids = loaded.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [len(row) for row in ids]

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(premise entails hypothesis) of each (premise, hypothesis), in batches of ``batch_size``."""
        loaded = self.load()
        import torch

        out: list[np.ndarray] = []
        with loaded.lock, torch.no_grad():
            for start in range(0, len(pairs), self.batch_size):
                part = list(pairs[start:start + self.batch_size])
                if loaded.index is None:
                    scores = loaded.model.predict(part)
                    out.append(np.asarray(torch.as_tensor(scores, dtype=torch.float32).reshape(-1).cpu()))
                    continue
                batch = loaded.tokenizer([p for p, _ in part], [h for _, h in part], padding=True,
                                         truncation="longest_first", max_length=loaded.max_length, return_tensors="pt")
                batch = {name: value.to(loaded.device) for name, value in batch.items()}
                logits = loaded.model(**batch).logits.float()
                if logits.shape[-1] == 1:
                    p = torch.sigmoid(logits[:, 0])
                else:
                    p = torch.softmax(logits, dim=-1)[:, loaded.index]
                out.append(p.cpu().numpy().astype(np.float64))
        return np.concatenate(out) if out else np.zeros(0)
