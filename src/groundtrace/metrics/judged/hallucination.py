"""`hallucination` (Mastra semantics): contradictions of the contexts plus unsupported claims.

    claims       = judge("split the answer into atomic statements")      (shared with faithfulness)
    contradicted = context statements the answer contradicts
    unsupported  = claims of the answer that no context supports
    value        = (contradicted + unsupported) / (context statements + claims) × scale
                                                                        higher = more hallucinated

Context statements are the retrieved passages (``context_unit="passage"``, Mastra's unit) or
their sentences (``context_unit="sentence"``). An empty answer scores 0 (nothing in it can
contradict anything). Speculative wording ("may", "possibly") about facts the contexts hold is
tolerated. The reason names each contradiction; contradicting excerpts and unsupported claims
become spans of the answer. ``scale`` lies in (0, 1], since a Score's value does.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun, clip, mean
from groundtrace.metrics.judged.statements import (
    Checked,
    extract,
    fixed_lists,
    listed,
    point_at,
)
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.sentences import split_sentences
from groundtrace.text.spans import locate


class ContextVerdict(BaseModel):
    reason: str
    contradicted: Literal[0, 1] = Field(description="1 if the answer directly contradicts this context statement")
    answer_quote: str = Field(description="the contradicting excerpt of the answer, verbatim; empty if none")


class ClaimVerdict(BaseModel):
    reason: str
    supported: Literal[0, 1] = Field(description="1 if some context supports this claim of the answer")


# The shape of the reply; fixed_lists fixes its lengths per call (no docstring: the judge would see it).
class HallucinationVerdicts(BaseModel):
    context_verdicts: list[ContextVerdict]
    claim_verdicts: list[ClaimVerdict]


class Hallucination(JudgeMetric):
    name = "hallucination"
    description = "LLM judge (Mastra): contradicted context statements + unsupported answer claims, over all statements."
    requires = ("answer", "contexts")
    higher_is_better = False
    # Uncalibrated: flagged at one problem in ten statements (one contradiction among 3 passages
    # and 7 claims, say). Fit one for your judge with `groundtrace bench --threshold-from`.
    default_threshold = 0.1
    prompt_files = ("statements", "hallucination")

    def __init__(self, *, scale: float = 1.0, context_unit: Literal["passage", "sentence"] = "passage", **options: Any) -> None:
        super().__init__(**options)
        if not 0.0 < float(scale) <= 1.0:
            raise ValueError(f"hallucination: scale must lie in (0, 1] (a Score's value lies in [0, 1]), got {scale}")
        if context_unit not in ("passage", "sentence"):
            raise ValueError(f"hallucination: context_unit must be 'passage' or 'sentence', got {context_unit!r}")
        self.scale = float(scale)
        self.context_unit = context_unit

    def check(self, record: Record) -> str | None:
        if record.answer is not None and not record.answer.strip():
            return None  # Mastra: an empty answer contradicts nothing and scores 0
        return super().check(record)

    def context_statements(self, contexts: list[str]) -> list[str]:
        passages = [c.strip() for c in contexts if c.strip()]
        if self.context_unit == "passage":
            return passages
        return [s.text for passage in passages for s in split_sentences(passage)]

    def judge(self, record: Record, run: JudgeRun) -> Result:
        answer = needed(record.answer)
        if not answer.strip():
            return Result(0.0, "the answer is empty: nothing in it can contradict the contexts", details={"claims": [], "contexts": []})
        statements = self.context_statements(needed(record.contexts))
        claims = extract(run, answer, name="answer", question=record.question)
        if not statements:
            checked = [Checked(c.statement, c.quote, 0.0, "no contexts were retrieved") for c in claims]
            contexts: list[dict[str, Any]] = []
            contradicted: list[dict[str, Any]] = []
        else:
            samples = run.ask(
                "hallucination",
                fixed_lists(HallucinationVerdicts, context_verdicts=len(statements), claim_verdicts=len(claims)),
                {"contexts": statements, "answer": answer, "claims": [c.statement for c in claims]},
                params={"context_count": len(statements), "claim_count": len(claims)}, sample=True,
            )
            checked = [Checked(c.statement, c.quote, mean([s.claim_verdicts[i].supported for s in samples]),
                               samples[0].claim_verdicts[i].reason) for i, c in enumerate(claims)]
            contexts = [self._context_item(answer, text, [s.context_verdicts[i] for s in samples])
                        for i, text in enumerate(statements)]
            contradicted = [c for c in contexts if c["contradicted"] >= 0.5]
        unsupported = [c for c in checked if not c.supported]
        total = len(statements) + len(claims)
        hallucinated = sum(c["contradicted"] for c in contexts) + sum(1.0 - c.support for c in checked)
        value = hallucinated / total * self.scale if total else 0.0
        spans = [Span(start=c["span"][0], end=c["span"][1], text=answer[c["span"][0]:c["span"][1]], label="contradiction",
                      score=round(c["contradicted"], 6)) for c in contradicted if c.get("span")]
        spans += point_at(answer, checked, "unsupported")
        return Result(value, self._reason(value, contradicted, unsupported, len(statements), len(claims)), spans, {
            "contexts": contexts, "claims": [c.as_dict() for c in checked], "contradicted": len(contradicted),
            "unsupported": len(unsupported), "total": total, "scale": self.scale, "context_unit": self.context_unit,
        })

    @staticmethod
    def _context_item(answer: str, text: str, verdicts: list[ContextVerdict]) -> dict[str, Any]:
        first = verdicts[0]
        item: dict[str, Any] = {"statement": text, "contradicted": mean([v.contradicted for v in verdicts]),
                                "reason": first.reason, "answer_quote": first.answer_quote}
        where = locate(answer, first.answer_quote) if item["contradicted"] >= 0.5 else None
        if where is not None:
            item["span"] = list(where)
        return item

    def _reason(self, value: float, contradicted: list[dict[str, Any]], unsupported: list[Checked], contexts: int, claims: int) -> str:
        head = (f"hallucination {value:.2f}: {len(contradicted)} of {contexts} context statements contradicted, "
                f"{len(unsupported)} of {claims} answer claims unsupported")
        parts = [f"the answer contradicts “{clip(c['statement'])}”" + (f" ({clip(c['reason'], 120)})" if c["reason"] else "")
                 for c in contradicted[:3]]
        if unsupported:
            parts.append(f"unsupported: {listed(unsupported)}")
        return head + ("; " + "; ".join(parts) if parts else "")
