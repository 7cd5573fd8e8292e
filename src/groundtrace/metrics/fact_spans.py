"""Grounding's spans, widened to the wrong fact itself.

The detector marks the tokens it finds unsupported, and in a contradiction those are not always the wrong number:
in "Entry costs 5 euros for students" (the context says 12 euros) it may mark "for students" and leave "5 euros"
plain, so a reviewer sees the wrong words marked. Here every number, date, time or name of an unsupported claim
that the contexts do not state (text.facts, as the `facts` metric checks them) is put inside a span: the span
beside it (nothing but blanks and punctuation between) grows to hold it, else the fact becomes a span of its own,
labelled by its kind and scored with its claim's P(unsupported). The score's value is not touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundtrace.score import Span
from groundtrace.text.facts import Fact, context_index, extract_facts

# what may stand between a fact and a span that grows to hold it
_JOINT = re.compile(r"[\s,;:()\[\]\"'«»“”‘’\-–—]*")
_TRAILING = " \t\n.,;:!?。，；：！？"


@dataclass(frozen=True)
class ClaimRange:
    start: int
    end: int
    p_unsupported: float


def absent_facts(answer: str, contexts: Sequence[str], language: str, claims: Sequence[ClaimRange],
                 threshold: float) -> list[tuple[Fact, float]]:
    """The facts of the answer's unsupported claims (P >= ``threshold``) that the contexts do not state, each with
    its claim's P(unsupported), in the answer's order."""
    flagged = [c for c in claims if c.p_unsupported >= threshold]
    if not flagged:
        return []
    facts = [(f, c.p_unsupported) for f in extract_facts(answer, language)
             for c in flagged if c.start <= f.start < c.end]
    if not facts:
        return []
    index = context_index("\n\n".join(contexts), language)
    return [(f, p) for f, p in facts if not index.supports(f)]


def with_facts(answer: str, spans: Sequence[Span], facts: Sequence[tuple[Fact, float]]) -> list[Span]:
    """``spans`` grown so that each fact lies inside one (see the module's docstring)."""
    out = sorted(spans, key=lambda s: s.start)
    for fact, p in facts:
        start, end = fact.start, fact.start + len(fact.text.rstrip(_TRAILING))
        if end <= start or any(s.start <= start and end <= s.end for s in out):
            continue
        near = next((i for i, s in enumerate(out) if _touch(answer, s.start, s.end, start, end)), None)
        if near is None:
            out.append(Span(start=start, end=end, text=answer[start:end], label=f"unsupported {fact.kind}",
                            score=round(p, 4)))
        else:
            s = out[near]
            lo, hi = min(s.start, start), max(s.end, end)
            out[near] = s.model_copy(update={"start": lo, "end": hi, "text": answer[lo:hi]})
        out = _merged(answer, sorted(out, key=lambda s: s.start))
    return out


def _touch(answer: str, a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    """Do two ranges overlap, or stand apart by nothing but blanks and punctuation?"""
    if a_start < b_end and b_start < a_end:
        return True
    gap = answer[a_end:b_start] if a_end <= b_start else answer[b_end:a_start]
    return _JOINT.fullmatch(gap) is not None


def _merged(answer: str, spans: list[Span]) -> list[Span]:
    """Overlapping spans as one (a grown span may reach the next)."""
    out: list[Span] = []
    for span in spans:
        if out and span.start < out[-1].end:
            last = out.pop()
            hi = max(last.end, span.end)
            span = last.model_copy(update={"end": hi, "text": answer[last.start:hi],
                                           "score": max(last.score or 0.0, span.score or 0.0)})
        out.append(span)
    return out
