"""One record as the report shows it: its texts cut into marked segments and its scores by metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groundtrace.report.evidence import ClaimView
from groundtrace.report.labels import GOLD, Gold
from groundtrace.report.passages import context_marks
from groundtrace.report.segments import Mark, Segment, segment
from groundtrace.report.summary import total_latency_ms
from groundtrace.score import Score, ScoredRecord

EXCERPT_CHARS = 160
LABEL_CHARS = 60  # a row's label: the question's first words, enough to tell records apart
REASON_CHARS = 300  # in a tooltip; the full reason is in the scores table below the answer


@dataclass
class RecordView:
    index: int
    row: ScoredRecord
    language: str | None
    answer: list[Segment]
    contexts: list[list[Segment]]
    cells: list[Score | None]  # one per metric of the report, in its order
    gold: Gold | None
    latency_ms: float | None
    trace: str | None = None  # the link to its trace, from the user's URL template
    claims: list[ClaimView] = field(default_factory=list)  # flagged claims beside their passages

    @property
    def anchor(self) -> str:
        return f"r{self.index}"  # never the record's own id: that is untrusted text

    @property
    def flagged(self) -> bool:
        return any(s.hallucinated for s in self.row.scores if s.ok)

    @property
    def label(self) -> str:
        """The question's first words (the answer's when there is none): a run UUID says less."""
        record = self.row.record
        return first_words(record.question or record.answer or "", LABEL_CHARS)

    @property
    def excerpt(self) -> str:
        answer = self.row.record.answer or ""
        return answer if len(answer) <= EXCERPT_CHARS else answer[:EXCERPT_CHARS] + "…"


def first_words(text: str, limit: int) -> str:
    """``text`` on one line, cut after a whole word (mid-word only where no space comes early enough,
    as in Chinese) to at most ``limit`` characters plus an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    return text[:cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def record_view(index: int, row: ScoredRecord, metrics: Sequence[str], gold: Gold | None,
                trace: str | None = None) -> RecordView:
    record = row.record
    answer_marks = [Mark(sp.start, sp.end, s.metric, sp.label, sp.score, s.reason) for s in row.scores for sp in s.spans]
    answer_marks += gold.spans if gold else ()
    contexts = record.contexts or []
    return RecordView(
        index=index,
        row=row,
        language=record.language or next((s.details["language"] for s in row.scores
                                          if isinstance(s.details.get("language"), str)), None),
        answer=segment(record.answer or "", answer_marks),
        contexts=[segment(text, marks) for text, marks in zip(contexts, context_marks(contexts, row.scores), strict=True)],
        cells=[row.score(name) for name in metrics],
        gold=gold,
        latency_ms=total_latency_ms(row),
        trace=trace,
    )


def tooltip(marks: Sequence[Mark]) -> str:
    """One line per mark: source, label, probability and the metric's reason."""
    lines = []
    for mark in marks:
        line = f"{mark.source}: {mark.label}"
        if mark.score is not None:
            line += f" (p={mark.score:.2f})"
        if mark.reason:
            reason = mark.reason if len(mark.reason) <= REASON_CHARS else mark.reason[:REASON_CHARS] + "…"
            line += f" — {reason}"
        lines.append(line)
    return "\n".join(lines)


def mark_class(segment: Segment, where: str = "answer") -> str:
    """CSS classes of a marked segment: in the answer, how many metrics agree and whether a gold
    span covers it; in a context, support or contradiction."""
    if where == "context":
        return "contra" if any(m.label == "contradicted" for m in segment.marks) else "support"
    metrics = sum(1 for s in segment.sources if s != GOLD)
    classes = [f"n{min(metrics, 3)}"] if metrics else []
    if GOLD in segment.sources:
        classes.append("gold")
    return " ".join(classes)
