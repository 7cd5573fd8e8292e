"""The review labels file: one JSON line per decision, appended, flushed and fsynced at once.

A line: ``{"id": record id, "label": "unsupported" | "supported" | "skip", "note": str, "reviewer": str,
"at": ISO time (UTC)}`` (``note`` and ``reviewer`` omitted when empty). The last line of a record id
counts: a label is changed by appending another. Each decision is written with one ``os.write`` of a
whole line on a descriptor opened with O_APPEND, so two reviewers on one file interleave whole lines
and a process killed mid-session leaves every confirmed decision on disk; a torn last line (a crash
inside the kernel's write, a full disk) is skipped on reading, with its line number, never fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from groundtrace.errors import GroundtraceError

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
    decision survives the process being killed."""
    line = (json.dumps(decision.as_json(), ensure_ascii=False) + "\n").encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(descriptor, line)
        if written != len(line):  # a full disk: say so rather than leave half a decision behind as if whole
            raise OSError(f"{path}: wrote {written} of {len(line)} bytes of a decision")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def iter_decisions(path: str | Path) -> Iterator[Decision]:
    """Every decision in file order; lines that are not decisions are skipped (a torn last line after a
    crash), lines of another format entirely raise LabelsFileError."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                if not line.endswith("\n"):  # a last line cut short: everything before it stands
                    return
                raise LabelsFileError(f"{path}:{number}: not a JSON line") from None
            yield _decision(row, path, number)


def _decision(row: Any, path: str | Path, number: int) -> Decision:
    if not isinstance(row, Mapping) or not isinstance(row.get("id"), (str, int)) or row.get("label") not in CHOICES:
        raise LabelsFileError(f"{path}:{number}: not a review decision (an id and a label of "
                              f"{', '.join(CHOICES)})")
    return Decision(str(row["id"]), str(row["label"]), str(row.get("note") or ""), str(row.get("reviewer") or ""),
                    str(row.get("at") or ""))


def read_decisions(path: str | Path) -> dict[str, Decision]:
    """Record id -> its last decision (a missing file: none yet)."""
    if not Path(path).exists():
        return {}
    latest: dict[str, Decision] = {}
    for decision in iter_decisions(path):
        latest.pop(decision.id, None)  # re-inserted: the order is that of the last decisions
        latest[decision.id] = decision
    return latest


def read_labels(path: str | Path) -> dict[str, int]:
    """Record id -> 0/1 (1 = unsupported), the skips left out: what ``fit --labels`` and ``bench --labels``
    join by id."""
    return {key: label for key, decision in read_decisions(path).items()
            if (label := decision.hallucinated) is not None}


__all__ = ["CHOICES", "SKIP", "SUPPORTED", "UNSUPPORTED", "Decision", "LabelsFileError", "append", "decide",
           "iter_decisions", "read_decisions", "read_labels"]
