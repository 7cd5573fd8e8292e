"""`groundtrace watch`: each answer's scores as they arrive in a scores file, like ``tail -f``.

Reads the lines of the jsonl sink and of ``groundtrace score -o`` (both ``{"id", "record", "scores"}``),
prints the last ones already there, then follows the file: one that does not exist yet is waited for,
one truncated or replaced is read again from its start, a line still being written waits for its end.
Colours only on a terminal (and never with NO_COLOR): piped, the text is plain.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pydantic import ValidationError

from groundtrace.cli.common import terminal_safe
from groundtrace.io import why_not_scored

from groundtrace.cli.common import NO_RECORDS_WHY, metric_names, store_or

#: how often a followed file is looked at
POLL_S = 0.25
QUESTION_WORDS = 8
PHRASES = 5


@dataclass
class View:
    """Which scores and answers are shown."""

    metrics: list[str]
    flagged_only: bool

    def scores(self, row: Any) -> list[Any] | None:
        """The row's Scores to show, or None when the row is not shown at all."""
        shown = [s for s in row.scores if not self.metrics or s.metric in self.metrics]
        if not shown or self.flagged_only and not any(s.hallucinated for s in shown):
            return None
        return shown


@dataclass
class Rates:
    """The running flagged rate per metric over every record read (shown or not): the line watch says on
    stderr after the records already there and after each batch that arrives."""

    metrics: list[str]
    counts: dict[str, list[int]] = field(default_factory=dict)  # metric -> [scored, flagged, failed]

    def add(self, row: Any) -> None:
        for score in row.scores:
            if self.metrics and score.metric not in self.metrics:
                continue
            counts = self.counts.setdefault(score.metric, [0, 0, 0])
            if score.value is None or score.error is not None:
                counts[2] += 1
            else:
                counts[0] += 1
                counts[1] += bool(score.hallucinated)

    def line(self) -> str | None:
        """The line 'so far: grounding 3 of 12 flagged (25%); ...'; None before any record."""
        parts = []
        for metric, (scored, flagged, failed) in self.counts.items():
            said = f"{metric} {flagged} of {scored} flagged ({flagged / scored:.0%})" if scored else f"{metric} none scored"
            parts.append(said + (f", {failed} failed" if failed else ""))
        return "so far: " + "; ".join(parts) if parts else None


def _question(row: Any) -> str:
    words = (row.record.question or "").split()
    if not words:
        return "(no question)"
    return " ".join(words[:QUESTION_WORDS]) + (" …" if len(words) > QUESTION_WORDS else "")


def _value(score: Any) -> str:
    return "  -  " if score.value is None else f"{score.value:.2f}"


def render(row: Any, scores: list[Any], arrived: str | None = None) -> Any:
    """One answer's block: time (when it arrived while watched), id, the question's first words; then
    each Score ``metric value verdict`` and the phrases a flagged one points at."""
    from rich.text import Text

    block = Text()
    head = f"{arrived}  " if arrived else ""
    # every text here comes from the file (answers, ids, errors quoting them): its control characters made inert
    block.append(terminal_safe(f"{head}{row.id or '(no id)'}"), style="bold")
    block.append(terminal_safe(f"  {_question(row)}") + "\n")
    width = max(len(s.metric) for s in scores)
    for score in scores:
        block.append(terminal_safe(f"  {score.metric:<{width}}  {_value(score)}  "))
        if score.error is not None:
            block.append(terminal_safe(f"error: {' '.join(score.error.split())}"), style="yellow")
        elif score.hallucinated:
            block.append("flagged", style="bold red")
        elif score.hallucinated is False:
            block.append("grounded", style="green")
        else:
            block.append("no verdict", style="dim")
        block.append("\n")
        if score.hallucinated and score.spans:
            # each phrase whole: a cut one cannot be found in the answer (the terminal wraps the line)
            phrases = ", ".join(f'"{" ".join(span.text.split())}"' for span in score.spans[:PHRASES])
            more = f" (+{len(score.spans) - PHRASES} more)" if len(score.spans) > PHRASES else ""
            block.append(terminal_safe(f"    {phrases}{more}") + "\n", style="red")
    return block


def _parse(line: bytes) -> Any:
    from groundtrace.score import ScoredRecord

    return ScoredRecord.model_validate_json(line)


class Follower:
    """The complete lines of a file as it grows; starts over when it is truncated or replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: Any = None
        self._identity: tuple[int, int] | None = None
        self._partial = b""

    def _reopen(self) -> bool:
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            return False
        if self._handle is not None:
            self._handle.close()
        stat = os.fstat(handle.fileno())
        self._handle, self._identity, self._partial = handle, (stat.st_dev, stat.st_ino), b""
        return True

    def lines(self) -> list[bytes]:
        """The complete lines written since the last call ([] when the file is missing)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return []
        replaced = self._identity != (stat.st_dev, stat.st_ino)
        if self._handle is None or replaced or stat.st_size < self._handle.tell():  # new, rotated or truncated
            if not self._reopen():
                return []
        chunk = self._handle.read()
        if not chunk:
            return []
        *complete, self._partial = (self._partial + chunk).split(b"\n")  # a torn last line waits for its end
        return [line for line in complete if line.strip()]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _rows(lines: Iterable[bytes], view: View, warn: Any, rates: Rates) -> Iterator[tuple[Any, list[Any]]]:
    for line in lines:
        try:
            row = _parse(line)
        except ValidationError as error:  # why, never the line itself: it is the user's text
            warn(f"skipped a line that is not a scored record: {why_not_scored(error)}")
            continue
        rates.add(row)
        scores = view.scores(row)
        if scores is not None:
            yield row, scores


def watch_command(
    path: Annotated[Optional[Path], typer.Argument(help="The scores file (JSONL of the jsonl sink or `groundtrace score -o`); default: the default store, GROUNDTRACE_JSONL_PATH else groundtrace-scores.jsonl here.", show_default=False)] = None,
    metrics: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="Show only these metrics (repeatable, or a comma list).")] = None,
    flagged: Annotated[bool, typer.Option("--flagged", help="Show only answers that a shown metric flagged.")] = False,
    last: Annotated[int, typer.Option("--last", min=0, help="How many records already in the file to show first.")] = 10,
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="Keep following the file for new records (--no-follow: print what is there and exit).")] = True,
) -> None:
    """Print each answer's scores as they arrive in a scores file: flagged in red, grounded in green, errors in yellow;
    on stderr, the running flagged rate per metric."""
    from rich.console import Console

    target = store_or(path)
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    view = View(metric_names(metrics), flagged)
    rates = Rates(view.metrics)

    def warn(message: str) -> None:
        err.print(f"groundtrace watch: {message}", style="dim", markup=False)

    def show(row: Any, scores: list[Any], arrived: str | None = None) -> None:
        out.print(render(row, scores, arrived))
        out.file.flush()  # piped into another program, each answer goes out as it arrives

    def say_rates() -> None:
        if (line := rates.line()) is not None:
            warn(line)

    follower = Follower(target)
    try:
        there = target.exists()
        if not there and not follow:
            warn(f"no scores yet: {target} does not exist (it appears with the first scored answer)")
            warn(NO_RECORDS_WHY.format(path=target))
            raise typer.Exit(2)
        lines = follower.lines()
        for row, scores in deque(_rows(lines, view, warn, rates), maxlen=last):  # read through, keep the last
            show(row, scores)
        say_rates()
        if not there:
            warn(f"waiting for {target} (nothing scored yet; Ctrl-C to stop)")
        elif not lines:  # there, and empty: a capture that recorded nothing, most likely
            warn(NO_RECORDS_WHY.format(path=target))
        while follow:
            time.sleep(POLL_S)
            arrived = follower.lines()
            for row, scores in _rows(arrived, view, warn, rates):
                show(row, scores, time.strftime("%H:%M:%S"))
            if arrived:
                say_rates()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how one stops watching: exit 0, quietly
    finally:
        follower.close()
    sys.stdout.flush()
