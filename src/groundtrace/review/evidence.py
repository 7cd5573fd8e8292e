"""For each flagged claim of an answer, the context passages it was checked against.

``grounding`` reads each claim against the context sentences its evidence selection picks (detector/
evidence.py, BM25 over content words with coverage of the claim's terms): the same selection, run on the
claims the Score names (``details["claims"]``), gives those sentences, best first. ``facts`` flags a
number, date or name: the sentences picked for the claim that holds it, where the context states the
facts its answer was compared with. Reads only the Record and the Scores; never calls a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundtrace.detector.claims import Claim, split_claims
from groundtrace.detector.evidence import select_evidence
from groundtrace.score import Score, ScoredRecord

PICKS = 2  # passages shown per claim


@dataclass(frozen=True)
class Passage:
    context: int  # index of the context
    start: int  # offsets into that context
    end: int
    text: str


@dataclass(frozen=True)
class CheckedClaim:
    """A flagged part of the answer (offsets into it), the metrics that flagged it, and its evidence."""

    start: int
    end: int
    text: str
    metrics: tuple[str, ...]
    passages: tuple[Passage, ...]


def _claims(answer: str, scores: Sequence[Score], language: str) -> list[Claim]:
    """The claims ``grounding`` read, where its Score names them; else the answer's own claims."""
    for score in scores:
        named = score.details.get("claims") if score.metric == "grounding" else None
        if isinstance(named, list) and named:
            found = [Claim(answer[c["start"]:c["end"]], int(c["start"]), int(c["end"])) for c in named
                     if isinstance(c, dict) and isinstance(c.get("start"), int) and isinstance(c.get("end"), int)
                     and 0 <= c["start"] < c["end"] <= len(answer)]
            if found:
                return found
    return split_claims(answer, language)


def checked_claims(row: ScoredRecord, language: str) -> list[CheckedClaim]:
    """The claims that hold a flagged span of any metric, in answer order, each with its passages."""
    record = row.record
    answer, contexts = record.answer or "", record.contexts or []
    flagged = [(span.start, span.end, score.metric) for score in row.scores if score.ok and score.hallucinated
               for span in score.spans if span.end > span.start]
    if not answer or not contexts or not flagged:
        return []
    claims = _claims(answer, row.scores, language)
    hit: dict[int, set[str]] = {}
    for start, end, metric in flagged:
        for i, claim in enumerate(claims):
            if claim.start < end and start < claim.end:  # the span lies (partly) in this claim
                hit.setdefault(i, set()).add(metric)
    if not hit:
        return []
    evidence = select_evidence(record.question, contexts, answer, language, claims=claims)
    checked = []
    for i in sorted(hit):
        passages = tuple(Passage(s.context, s.start, s.end, s.text) for s in evidence.evidence_of(i)[:PICKS])
        claim = claims[i]
        checked.append(CheckedClaim(claim.start, claim.end, claim.text, tuple(sorted(hit[i])), passages))
    return checked


__all__ = ["CheckedClaim", "Passage", "checked_claims"]
