"""What the demo prints: one row per question, and one line on how the planted hallucinations fared."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from groundtrace_demo.data import Question
from groundtrace.score import ScoredRecord, Span

# Metrics whose spans the table shows: lexical marks single words, too noisy for one cell.
SPAN_METRICS = ("grounding", "facts")
ANSWER_CHARS = 240  # the recorded answers fit; a live LLM's long answer is cut


@dataclass
class Outcome:
    """A question of the demo, the framework that answered it, and its scored record (None if lost)."""

    question: Question
    framework: str
    row: ScoredRecord | None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _cell(row: ScoredRecord | None, metric: str) -> str:
    score = row.score(metric) if row else None
    if score is None or not score.ok:
        return "error" if score else "—"
    return f"{score.value:.2f}{' ⚠' if score.hallucinated else ''}"


def _spans(row: ScoredRecord | None) -> list[Span]:
    """The answer's unsupported spans that grounding or facts point at, in answer order."""
    if row is None:
        return []
    return sorted((s for score in row.scores if score.metric in SPAN_METRICS for s in score.spans),
                  key=lambda s: (s.start, -s.end))


def flagged_text(row: ScoredRecord | None) -> list[str]:
    return list(dict.fromkeys(s.text for s in _spans(row)))


def _exchange(question: str, row: ScoredRecord | None) -> Text:
    """The question in bold, then the answer with its flagged spans underlined in red."""
    answer = (row.record.answer or "") if row else "(no score arrived)"
    shown = _clip(answer, ANSWER_CHARS)
    text = Text(question, style="bold")
    text.append("\n→ ")
    offset = len(text)
    text.append(shown)
    for span in _spans(row):
        if span.start < len(shown):
            text.stylize("red underline", offset + span.start, offset + min(span.end, len(shown)))
    return text


def outcomes_table(outcomes: Sequence[Outcome], metrics: Sequence[str], replay: bool) -> Table:
    table = Table(title="groundtrace demo: every answer, scored in the background", show_lines=True, show_edge=False)
    table.add_column("id")
    table.add_column("question → answer", ratio=3)
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_column("flagged text", ratio=2)
    table.add_column("recorded as" if replay else "answered by", ratio=1)
    for item in outcomes:
        table.add_row(item.question.id, _exchange(item.question.question, item.row),
                      *(_cell(item.row, m) for m in metrics), Text(_clip(" · ".join(flagged_text(item.row)), 90)),
                      item.question.label if replay else item.framework)
    return table


def _flagged(outcomes: Sequence[Outcome], metric: str) -> int:
    return sum(1 for o in outcomes if o.row and (s := o.row.score(metric)) is not None and s.ok and s.hallucinated)


def summary_line(outcomes: Sequence[Outcome], metrics: Sequence[str], llm_label: str, replay: bool) -> str:
    """e.g. 'replay: …: grounding flagged 6 of 6 planted hallucinations and 0 of 6 faithful answers (…)'."""
    head, *rest = metrics
    if not replay:
        others = "; ".join(f"{m}: {_flagged(outcomes, m)}" for m in rest)
        return (f"{llm_label}: {head} flagged {_flagged(outcomes, head)} of {len(outcomes)} generated answers"
                + (f" ({others})" if others else ""))
    planted = [o for o in outcomes if o.question.tag == "planted"]
    faithful = [o for o in outcomes if o.question.tag != "planted"]

    def counts(metric: str) -> tuple[str, str]:
        return f"{_flagged(planted, metric)} of {len(planted)}", f"{_flagged(faithful, metric)} of {len(faithful)}"

    in_planted, in_faithful = counts(head)
    others = "; ".join(f"{m}: {' and '.join(counts(m))}" for m in rest)
    return (f"{llm_label}: {head} flagged {in_planted} planted hallucinations and {in_faithful} faithful answers"
            + (f" ({others})" if others else ""))
