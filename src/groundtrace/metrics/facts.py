"""`facts`: the second seed, embedding similarity plus checkable facts.

    S_c = cosine(embedding(answer), embedding(context))     the concept score
    F(x) = numbers with their units, years, dates, names, acronyms of x (text.facts; a number
           is supported only in a unit that agrees: "5 years" not by "5 business days", text.units)
    F_h = F(O) \\ F(C)   hallucinated facts;   F_m = F(C) \\ F(O)   missing facts
    E_f = |F_h| / |F(O)|                        mode "hallucination" (default): omissions are fine
        = 1 if F(O) empty and F(C) not; 0 if both empty; else min((|F_h| + |F_m|) / |F(O)|, 1)
                                                mode "seed": the seed's formula, omissions count
    S   = clip(w_c·(1 − S_c) + w_f·E_f, 0, 1)    higher = more hallucinated

Several contexts: facts are pooled (a fact is supported if any context states it) and S_c is the
similarity to the closest context ("max"); docs/benchmarks/quality.md has the measurement.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from groundtrace.backends.embedders import Embedder, get_embedder
from groundtrace.metrics.base import Metric, Result, needed
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.facts import Fact, FactIndex, context_index, extract_facts, unique_by_key

Mode = Literal["hallucination", "seed"]
Similarity = Literal["max", "mean", "concat"]


def _label(fact: Fact) -> str:
    return f"{fact.text} ({fact.kind})"


class FactsMetric(Metric):
    name = "facts"
    description = "Embedding similarity to the contexts plus numbers, dates and names absent from them."
    higher_is_better = False
    default_threshold = 0.30  # F1-optimal on uhgeval_zh_train (HaluEval gives it no signal); docs/metrics/facts.md, "Default threshold"

    def __init__(
        self,
        *,
        embedder: str | Embedder | None = None,
        concept_weight: float = 0.5,
        fact_weight: float = 0.5,
        mode: Mode = "hallucination",
        similarity: Similarity = "max",
        **options,
    ) -> None:
        super().__init__(**options)
        if mode not in ("hallucination", "seed"):
            raise ValueError(f"facts: mode must be 'hallucination' or 'seed', got {mode!r}")
        if similarity not in ("max", "mean", "concat"):
            raise ValueError(f"facts: similarity must be 'max', 'mean' or 'concat', got {similarity!r}")
        self._embedder_spec = embedder
        self.concept_weight = concept_weight
        self.fact_weight = fact_weight
        self.mode = mode
        self.similarity = similarity

    @property
    def embedder(self) -> Embedder:
        return get_embedder(self._embedder_spec)

    def concept_score(self, answer: str, contexts: list[str]) -> float:
        if self.similarity == "concat":
            contexts = ["\n\n".join(contexts)]
        vectors = self.embedder.embed([answer, *contexts])
        similarities = vectors[1:] @ vectors[0]
        return float(similarities.max() if self.similarity == "max" else similarities.mean())

    def compute(self, record: Record, language: str) -> Result:
        answer = needed(record.answer)
        contexts = [c for c in needed(record.contexts) if c.strip()]
        answer_facts = extract_facts(answer, language)
        f_o = unique_by_key(answer_facts)
        if not contexts:
            spans = [_span(f) for f in answer_facts]
            return Result(1.0, "no contexts were retrieved, so nothing in the answer is supported", spans,
                          {"S_c": None, "E_f": 1.0, "hallucinated_facts": [f.text for f in f_o], "missing_facts": []})

        s_c = self.concept_score(answer, contexts)
        context = context_index("\n\n".join(contexts), language)
        f_h = [f for f in f_o if not context.supports(f)]
        f_c = unique_by_key(context.facts)
        f_m: list[Fact] = []
        if self.mode == "seed":
            answer_index = FactIndex.build(answer, language, answer_facts)
            f_m = [f for f in f_c if not answer_index.supports(f)]
            if not f_o:
                e_f = 1.0 if f_c else 0.0
            else:
                e_f = min((len(f_h) + len(f_m)) / len(f_o), 1.0)
        else:
            e_f = len(f_h) / len(f_o) if f_o else 0.0
        s = self.concept_weight * (1.0 - s_c) + self.fact_weight * e_f

        bad_keys = {(f.kind, f.key) for f in f_h}
        spans = [_span(f) for f in answer_facts if (f.kind, f.key) in bad_keys]
        return Result(
            value=float(np.clip(s, 0.0, 1.0)),
            reason=self._reason(s, s_c, f_o, f_h, f_m),
            spans=spans,
            details={
                "S_c": s_c,
                "E_f": e_f,
                "mode": self.mode,
                "similarity": self.similarity,
                "answer_facts": [f.text for f in f_o],
                "hallucinated_facts": [f.text for f in f_h],
                "missing_facts": [f.text for f in f_m],
                "context_facts": len(f_c),
            },
        )

    def _reason(self, s: float, s_c: float, f_o: list[Fact], f_h: list[Fact], f_m: list[Fact]) -> str:
        text = f"hallucination {min(max(s, 0.0), 1.0):.2f}: similarity to the contexts {s_c:.2f}"
        if not f_o:
            text += "; the answer states no numbers, dates or names to check"
        elif f_h:
            shown = ", ".join(_label(f) for f in f_h[:6]) + (" …" if len(f_h) > 6 else "")
            text += f"; {len(f_h)} of {len(f_o)} facts are not in the contexts: {shown}"
        else:
            text += ("; the answer's one fact is in the contexts" if len(f_o) == 1
                     else f"; all {len(f_o)} facts of the answer are in the contexts")
        if f_m:
            text += f"; {len(f_m)} facts of the contexts are missing from the answer"
        return text


def _span(fact: Fact) -> Span:
    return Span(start=fact.start, end=fact.end, text=fact.text, label=f"unsupported {fact.kind}")
