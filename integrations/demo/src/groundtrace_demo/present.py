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
# In a terminal of NARROW columns or fewer, the answer is cut to NARROW_ANSWER_CHARS around its first flagged
# span and the flagged text wraps at NARROW_FLAGGED_COLUMNS, so that the answer keeps the room.
NARROW = 120
NARROW_ANSWER_CHARS = 110
NARROW_FLAGGED_COLUMNS = 18


@dataclass
class Outcome:
    """A question of the demo, the framework that answered it, and its scored record (None if lost)."""

    question: Question
    framework: str
    row: ScoredRecord | None


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


def excerpt(answer: str, spans: Sequence[Span], limit: int) -> tuple[str, int]:
    """At most ``limit`` characters of the answer, beginning early enough that its first flagged span is
    in them, with "…" where it was cut; and how far answer offsets move in the excerpt."""
    if len(answer) <= limit:
        return answer, 0
    start = 0
    if spans and spans[0].end > limit - 1:  # the first span would be cut off: begin a little before it
        start = answer.rfind(" ", 0, max(0, spans[0].start - limit // 4)) + 1
    head = "…" if start else ""
    body = answer[start:]
    if len(head) + len(body) > limit:  # cut at the last word boundary that fits
        body = body[: limit - len(head)].rsplit(" ", 1)[0].rstrip() + "…"
    return head + body, len(head) - start


def _exchange(question: str, row: ScoredRecord | None, limit: int) -> Text:
    """The question in bold, then the answer (cut to ``limit``) with its flagged spans underlined in red."""
    answer = (row.record.answer or "") if row else "(no score arrived)"
    spans = _spans(row)
    shown, shift = excerpt(answer, spans, limit)
    text = Text(question, style="bold")
    text.append("\n→ ")
    offset = len(text)
    text.append(shown)
    for span in spans:
        start, end = max(span.start + shift, 0), min(span.end + shift, len(shown))
        if start < end:
            text.stylize("red underline", offset + start, offset + end)
    return text


def _scores(row: ScoredRecord | None, metrics: Sequence[str]) -> Text:
    """One line per metric: its name and value, ⚠ where it flags the answer."""
    width = max(map(len, metrics))
    return Text("\n".join(f"{m:<{width}} {_cell(row, m):>6}" for m in metrics))


def outcomes_table(outcomes: Sequence[Outcome], metrics: Sequence[str], replay: bool, width: int | None = None) -> Table:
    """One row per question; ``width``, the terminal's columns: at NARROW or less the answers are cut
    (never the flagged text), so the table fits an 80-column terminal."""
    narrow = width is not None and width <= NARROW
    limit = NARROW_ANSWER_CHARS if narrow else ANSWER_CHARS
    table = Table(title="groundtrace demo: every answer, scored in the background", show_lines=True, show_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("question → answer")
    table.add_column("scores", no_wrap=True)
    table.add_column("flagged text", max_width=NARROW_FLAGGED_COLUMNS if narrow else None)
    for item in outcomes:
        found = " · ".join(flagged_text(item.row))
        flagged = Text(found or "—", style="red" if found else "")
        flagged.append("\n" + (item.question.label if replay else f"answered by {item.framework}"), style="dim")
        table.add_row(item.question.id, _exchange(item.question.question, item.row, limit),
                      _scores(item.row, metrics), flagged)
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
