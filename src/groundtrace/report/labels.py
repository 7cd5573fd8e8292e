"""Gold labels for scored records: a 0/1 hallucination label and the gold spans of the answer.

They come from the labelled file that was scored (the format of ``groundtrace bench``: ``label``,
``spans`` with ``start``, ``end``, ``text`` and ``type``), joined by record id, or from the record's
own metadata when whatever wrote it kept them there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundtrace.io import read_layout
from groundtrace.record import InvalidInput
from groundtrace.report.segments import Mark
from groundtrace.score import ScoredRecord

GOLD = "gold"  # the source name of a gold span, beside the metric names


@dataclass(frozen=True)
class Gold:
    label: int | None
    spans: tuple[Mark, ...] = ()


def load_labels(path: str | Path, schema: str | None = None) -> dict[str, Mapping[str, Any]]:
    """The rows of a labelled file (JSON Lines, CSV or Parquet, in any layout of groundtrace.io.layouts;
    ``schema`` forces one) by id; rows without an id cannot be joined and are skipped."""
    rows: dict[str, Mapping[str, Any]] = {}
    for row in read_layout(path, schema, require_answer=False).rows:  # labels alone (id, label, spans) will do
        if isinstance(row, InvalidInput):
            raise ValueError(f"{path}: {row.message}")  # noqa: TRY004 (bad content, not a bad argument)
        if row.get("id") is not None:
            rows[str(row["id"])] = row
    return rows


def gold_of(row: ScoredRecord, labelled: Mapping[str, Mapping[str, Any]] | None = None) -> Gold | None:
    source = (labelled or {}).get(row.id or "") or row.record.metadata
    label = source.get("label")
    label = int(label) if label in (0, 1, True, False) else None
    spans = tuple(_gold_spans(row.record.answer or "", source.get("spans")))
    if label is None and not spans:
        return None
    return Gold(label, spans)


def _gold_spans(answer: str, spans: Any) -> list[Mark]:
    marks = []
    for span in spans if isinstance(spans, list) else ():
        try:
            start, end = int(span["start"]), int(span["end"])
        except (KeyError, TypeError, ValueError):
            continue
        text = span.get("text")
        if isinstance(text, str) and text and answer[start:end] != text:
            # offsets of another version of the answer (say, before control characters were
            # cleaned): trust the text where it is unambiguous
            start = answer.find(text)
            if start < 0:
                continue
            end = start + len(text)
        marks.append(Mark(start, end, GOLD, str(span.get("type") or span.get("label") or "gold span")))
    return marks
