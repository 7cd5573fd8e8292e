"""Each flagged claim of an answer beside the context passages it was checked against.

Which passages those are is decided where the detector's evidence selection lives (the report reads
Records and Scores and never a metric or the detector: groundtrace.review.evidence ``checked_claims``
is what the command line hands :func:`groundtrace.report.render.write_report`); this module only cuts
the texts for the page: the claim with the metrics' flagged spans marked in it, and each passage
marked inside a little of the context around it, so the reader sees where it sits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from groundtrace.report.segments import Mark, Segment, segment
from groundtrace.score import ScoredRecord

AROUND = 160  # characters of the context shown before and after a passage


class Passage(Protocol):
    @property
    def context(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


class CheckedClaim(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def metrics(self) -> Sequence[str]: ...
    @property
    def passages(self) -> Sequence[Passage]: ...


# (scored record, its language) -> its flagged claims with their passages
Evidence = Callable[[ScoredRecord, str], Sequence[CheckedClaim]]


@dataclass(frozen=True)
class PassageView:
    context: int
    segments: list[Segment]  # the passage is the marked segment; "…" ends where the context goes on
    cut_before: bool
    cut_after: bool


@dataclass(frozen=True)
class ClaimView:
    metrics: tuple[str, ...]
    claim: list[Segment]  # the claim, the metrics' flagged spans marked
    passages: list[PassageView]


def claim_views(row: ScoredRecord, checked: Sequence[CheckedClaim]) -> list[ClaimView]:
    answer, contexts = row.record.answer or "", row.record.contexts or []
    out = []
    for claim in checked:
        if not 0 <= claim.start < claim.end <= len(answer):
            continue
        marks = [Mark(sp.start - claim.start, sp.end - claim.start, s.metric, sp.label, sp.score, s.reason)
                 for s in row.scores if s.ok and s.hallucinated and s.metric in claim.metrics
                 for sp in s.spans if sp.start < claim.end and claim.start < sp.end]
        passages = []
        for passage in claim.passages:
            if not 0 <= passage.context < len(contexts):
                continue
            text = contexts[passage.context]
            if not 0 <= passage.start < passage.end <= len(text):
                continue
            lo, hi = max(0, passage.start - AROUND), min(len(text), passage.end + AROUND)
            mark = Mark(passage.start - lo, passage.end - lo, "evidence", "checked against")
            passages.append(PassageView(passage.context, segment(text[lo:hi], [mark]), lo > 0, hi < len(text)))
        out.append(ClaimView(tuple(claim.metrics), segment(answer[claim.start:claim.end], marks), passages))
    return out
