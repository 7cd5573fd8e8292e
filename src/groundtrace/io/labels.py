"""The review labels file: one JSON line per decision, appended, flushed and fsynced at once.

A line: ``{"id": record id, "label": "unsupported" | "supported" | "skip", "note": str, "reviewer": str,
"at": ISO time (UTC)}`` (``note`` and ``reviewer`` omitted when empty). The last line of a record id
counts: a label is changed by appending another. Each decision is written with one ``os.write`` of a
whole line on a descriptor opened with O_APPEND, so two reviewers on one file interleave whole lines
and a process killed mid-session leaves every confirmed decision on disk.

The file is a log that heals. A write that fails part-way (a full disk) is cut back to where it began
before the error is raised, so no fragment stays; a fragment left by a crash is ended with a newline
by the next decision, never glued to it; and readers skip a line that is not a decision wherever it is
(not JSON, JSON nested too deeply to read, or a hand edit: ``"label": "Unsupported"``, an id that is a
list, a JSON array), counting it and saying its line number once (a WARNING, never its text), never fatal.
A file none of whose lines is a decision is not a labels file (LabelsFileError).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from groundtrace.errors import GroundtraceError
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.review")

SUPPORTED, UNSUPPORTED, SKIP = "supported", "unsupported", "skip"
CHOICES = (SUPPORTED, UNSUPPORTED, SKIP)
MAX_NOTE = 2000  # characters of a note kept


class LabelsFileError(GroundtraceError, ValueError):
    """A labels file that cannot be read as one (not JSON lines of decisions)."""


@dataclass(frozen=True)
class Decision:
    """One reviewer's decision on one record."""

    id: str
    label: str
    note: str = ""
    reviewer: str = ""
    at: str = ""

    @property
    def hallucinated(self) -> int | None:
        """The 0/1 label ``fit`` and ``bench`` use (1 = unsupported); None for a skip."""
        return {UNSUPPORTED: 1, SUPPORTED: 0}.get(self.label)

    def as_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "label": self.label}
        if self.note:
            row["note"] = self.note
        if self.reviewer:
            row["reviewer"] = self.reviewer
        row["at"] = self.at
        return row


def decide(record_id: str, label: str, note: str = "", reviewer: str = "") -> Decision:
    """A checked decision, stamped now. Raises ValueError for an unknown label or an empty id."""
    if label not in CHOICES:
        raise ValueError(f"label {label!r}: one of {', '.join(CHOICES)}")
    if not isinstance(record_id, str) or not record_id:
        raise ValueError("a decision needs the record's id")
    return Decision(record_id, label, note.strip()[:MAX_NOTE], reviewer.strip()[:200],
                    datetime.now(timezone.utc).isoformat(timespec="seconds"))


def append(path: str | Path, decision: Decision) -> None:
    """Append one decision as one whole line and fsync it before returning: once this returns, the
    decision survives the process being killed. A write that fails part-way is cut back before raising."""
    line = (json.dumps(decision.as_json(), ensure_ascii=False) + "\n").encode("utf-8")
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        began = os.fstat(descriptor).st_size
        if began and os.pread(descriptor, 1, began - 1) != b"\n":  # a crash's fragment: end it, do not glue to it
            line = b"\n" + line
        try:
            written = os.write(descriptor, line)
        except OSError:
            _cut_back(descriptor, began, None)
            raise
        if written != len(line):  # a full disk: no half decision may stay behind as if whole
            _cut_back(descriptor, began, written)
            raise OSError(errno.ENOSPC, f"{path}: the disk took {written} of {len(line)} bytes of a decision")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _cut_back(descriptor: int, began: int, written: int | None) -> None:
    """Truncate what this write left, if it is still the file's tail (another reviewer may have appended since)."""
    try:
        size = os.fstat(descriptor).st_size
        if size > began and (written is None or size == began + written):
            os.ftruncate(descriptor, began)
            os.fsync(descriptor)
    except OSError:  # the file stays as it is: its readers skip the fragment
        pass


def iter_decisions(path: str | Path, skipped: list[int] | None = None) -> Iterator[Decision]:
    """Every decision in file order. A line that is not one (a fragment of a write a crash or a full disk cut
    short, JSON nested too deeply to read, a hand edit that left JSON but no decision) is skipped wherever it
    is and its number appended to ``skipped``; a file with no decision at all raises LabelsFileError (another
    kind of file)."""
    cut: list[int] = [] if skipped is None else skipped
    found = 0
    first_json = 0  # the first skipped line that was JSON: what another kind of file is told by
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: [[[... nested past Python's stack
                cut.append(number)
                continue
            decision = _decision(row)
            if decision is None:  # one hand-edited line must not cost the reviewer the file
                cut.append(number)
                first_json = first_json or number
                continue
            found += 1
            yield decision
    if cut and not found:
        if first_json:
            raise LabelsFileError(f"{path}:{first_json}: not a review decision (an id and a label of "
                                  f"{', '.join(CHOICES)})")
        raise LabelsFileError(f"{path}: no line is a review decision (line {cut[0]} is not JSON)")


def _decision(row: Any) -> Decision | None:
    """The decision a parsed line holds; None where it holds none (the label's case matters: it is the file's
    value, not a word)."""
    if not isinstance(row, Mapping) or row.get("label") not in CHOICES:
        return None
    key, texts = row.get("id"), [row.get(name) for name in ("note", "reviewer", "at")]
    if isinstance(key, bool) or not isinstance(key, (str, int)) or key == "" or \
            not all(text is None or isinstance(text, str) for text in texts):
        return None
    return Decision(str(key), str(row["label"]), *(text or "" for text in texts))


def read_decisions(path: str | Path) -> dict[str, Decision]:
    """Record id -> its last decision (a missing file: none yet)."""
    if not Path(path).exists():
        return {}
    latest: dict[str, Decision] = {}
    skipped: list[int] = []
    for decision in iter_decisions(path, skipped):
        latest.pop(decision.id, None)  # re-inserted: the order is that of the last decisions
        latest[decision.id] = decision
    if skipped:
        _say_skipped(Path(path), skipped)
    return latest


_said: set[tuple[str, tuple[int, ...]]] = set()


def _say_skipped(path: Path, lines: list[int]) -> None:
    """Once per file and set of lines (the review app reads the file at every decision)."""
    key = (str(path.resolve()), tuple(lines))
    if key in _said:
        return
    _said.add(key)
    shown = ", ".join(map(str, lines[:10])) + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")
    log.warning("groundtrace: %s: skipped %d line(s) that are not whole decisions (line %s): a write cut short "
                "by a crash or a full disk, or a hand edit", path, len(lines), shown)


def read_labels(path: str | Path) -> dict[str, int]:
    """Record id -> 0/1 (1 = unsupported), the skips left out: what ``fit --labels`` and ``bench --labels``
    join by id."""
    return {key: label for key, decision in read_decisions(path).items()
            if (label := decision.hallucinated) is not None}


__all__ = ["CHOICES", "SKIP", "SUPPORTED", "UNSUPPORTED", "Decision", "LabelsFileError", "append", "decide",
           "iter_decisions", "read_decisions", "read_labels"]


def labels_path_for(scores: Path) -> Path:
    """The labels file beside a scores file, where `groundtrace review` writes it: answers.scores.jsonl ->
    answers.scores.labels.jsonl."""
    return scores.with_name(scores.name.removesuffix(".jsonl") + ".labels.jsonl")
