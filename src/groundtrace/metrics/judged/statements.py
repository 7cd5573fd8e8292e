"""The statement-verdict machinery that faithfulness, context_recall, hallucination,
answer_correctness and answer_completeness share.

1. :func:`extract` asks the judge to split a text into atomic statements (or key points), each
   with the verbatim excerpt of the text that states it.
2. :func:`verify` asks for one verdict per statement (1 = the evidence supports it, 0 = not), with
   the list length fixed by the schema, so a judge cannot drop or add verdicts: a reply with the
   wrong count fails validation and gets the client's one repair request.

With ``n`` samples, a statement's ``support`` is the mean of its verdicts, and the metric's value
is the mean support (= the mean over samples of the supported fraction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, create_model

from groundtrace.metrics.judged.base import JudgeRun, clip, mean
from groundtrace.score import Span
from groundtrace.text.spans import first_located

#: at most this many statements per text: bounds the judge's output (and a tiny model's loops)
MAX_STATEMENTS = 40
# No string constraints (minLength) in these schemas: OpenAI's strict mode rejects them. Empty
# strings are dropped in code instead.

class Statement(BaseModel):
    statement: str = Field(description="one self-contained atomic claim, pronouns resolved")
    quote: str = Field(description="the shortest verbatim excerpt of the text that states it")


class Statements(BaseModel):
    statements: list[Statement] = Field(max_length=MAX_STATEMENTS)


class Verdict(BaseModel):
    reason: str = Field(description="why, in one sentence")
    verdict: Literal[0, 1] = Field(description="1 if the evidence supports the statement, else 0")


# The shape of verify's reply; fixed_lists fixes its length per call. (No docstring: it would become the
# schema's description, which the judge sees.)
class Verdicts(BaseModel):
    verdicts: list[Verdict]


M = TypeVar("M", bound=BaseModel)


@cache
def fixed_lists(shape: type[M], **lengths: int) -> type[M]:
    """``shape`` with each named list field of exactly its length: ``fixed_lists(Verdicts, verdicts=4)``.
    The schema keeps ``shape``'s name and fields, so a reply is read as a ``shape``."""
    fields: dict[str, Any] = {
        # the item type is the field's own, known only at run time
        name: (Annotated[shape.model_fields[name].annotation, Field(min_length=count, max_length=count)], ...)
        for name, count in lengths.items()
    }
    return create_model(shape.__name__, __base__=shape, **fields)


@dataclass
class Checked:
    """One statement and what the judge said about it."""

    statement: str
    quote: str
    support: float  # mean verdict over the samples, in [0, 1]
    reason: str
    span: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return self.support >= 0.5

    def as_dict(self) -> dict[str, Any]:
        out = {"statement": self.statement, "quote": self.quote, "verdict": self.support, "reason": self.reason}
        if self.span is not None:
            out["span"] = list(self.span)
        return {**out, **self.extra}


def extract(run: JudgeRun, text: str, *, name: str, question: str | None = None,
            prompt: str = "statements") -> list[Statement]:
    """The statements (``prompt="keypoints"``: key points) of ``text``, once, at temperature 0."""
    [result] = run.ask(prompt, Statements, {"question": question, "text": text}, params={"text_kind": name})
    return [s for s in result.statements if s.statement.strip()]


def verify(run: JudgeRun, statements: list[Statement], evidence: list[str], *, evidence_name: str = "context",
           no_evidence_reason: str = "there is no evidence to check it against") -> list[Checked]:
    """One :class:`Checked` per statement: is it supported by ``evidence``?"""
    if not statements:
        return []
    evidence = [e for e in evidence if e.strip()]
    if not evidence:
        return [Checked(s.statement, s.quote, 0.0, no_evidence_reason) for s in statements]
    samples = run.ask("verify", fixed_lists(Verdicts, verdicts=len(statements)),
                      {"evidence": evidence, "statements": [s.statement for s in statements]},
                      params={"count": len(statements), "evidence_name": evidence_name}, sample=True)
    return [
        Checked(s.statement, s.quote, mean([sample.verdicts[i].verdict for sample in samples]), samples[0].verdicts[i].reason)
        for i, s in enumerate(statements)
    ]


def point_at(answer: str, checked: list[Checked], label: str, *, when: float = 0.5) -> list[Span]:
    """Spans of the answer for the statements whose support is below ``when``: the judge's quote
    where it is in the answer, else the statement itself where the answer says it verbatim."""
    spans = []
    for item in checked:
        if item.support >= when:
            continue
        item.span = first_located(answer, item.quote, item.statement)
        if item.span is not None:
            start, end = item.span
            spans.append(Span(start=start, end=end, text=answer[start:end], label=label, score=round(1.0 - item.support, 6)))
    return spans


def listed(items: list[Checked], limit: int = 3) -> str:
    shown = "; ".join(f"“{clip(c.statement)}”" for c in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
