"""Reading records (JSON Lines, CSV, Parquet; in any layout of :mod:`groundtrace.io.layouts`) and
writing scored records as JSON Lines."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from pydantic import ValidationError

from groundtrace._extras import missing_extra
from groundtrace.io.layouts import Layout, resolve
from groundtrace.record import InvalidInput
from groundtrace.redaction import get_logger
from groundtrace.score import ScoredRecord

log = get_logger("groundtrace.io")

#: rows whose keys decide a file's layout (a key that first appears later is read by the layout chosen)
DETECTION_ROWS = 1000


# JSON's own whitespace: a line of nothing else is blank (a line of other spaces is an input, and invalid)
_BLANK = b" \t\r\n"


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any] | InvalidInput]:
    """One mapping per non-blank line; a line that is not a JSON object becomes an InvalidInput.

    Lines end at "\n" only: a stray "\r" (or any other Unicode line break) inside a line does not
    make two inputs of one. Undecodable bytes are replaced rather than fatal: one corrupt line must
    not lose the file.
    """
    handle: BinaryIO = sys.stdin.buffer if str(path) == "-" else open(path, "rb")
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip(_BLANK):
                continue
            line = raw.decode("utf-8", "replace")
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is not valid JSON ({error.msg})")
                continue
            except RecursionError:  # JSON nested past Python's stack ([[[... 100,000 deep): one bad line, not the file's
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is JSON nested too deeply to read")
                continue
            if not isinstance(value, dict):
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is a JSON {type(value).__name__}, not an object")
                continue
            yield scored_record_row(value)


def is_scores_file(path: str | Path | None) -> bool:
    """Whether ``path`` is one of groundtrace's scores files (its first line a scored record), so its stored
    scores can be reused instead of scored again."""
    if path is None or str(path) == "-" or is_parquet(path) or is_csv(path) or not Path(path).is_file():
        return False
    with open(path, "rb") as handle:
        for raw in handle:
            if raw.strip(_BLANK):
                try:
                    row = json.loads(raw)
                except (ValueError, RecursionError):  # not a scores file's line: read as records, each line judged there
                    return False
                return isinstance(row, dict) and scored_record_row(row) is not row
    return False


def scored_record_row(row: dict[str, Any]) -> dict[str, Any]:
    """A line of groundtrace's own scores files (the default store, ``score -o``, a backfill: ``{"id", "record",
    "scores"}``) as the record it scored, its id kept; any other row as it is. So every command that reads
    records reads a scores file too, with no conversion step."""
    record = row.get("record")
    if isinstance(record, dict) and isinstance(row.get("scores"), list) and set(row) <= {"id", "record", "scores"}:
        return {**record, "id": row.get("id", record.get("id"))}
    return row


def is_parquet(path: str | Path) -> bool:
    return str(path).lower().endswith((".parquet", ".pq"))


def is_csv(path: str | Path) -> bool:
    return str(path).lower().endswith(".csv")


def read_records(path: str | Path) -> Iterator[dict[str, Any] | InvalidInput]:
    """Rows as they are in the file: JSON Lines; Parquet when the name ends in .parquet; CSV when it
    ends in .csv (one row per record, columns named like the JSON fields). ``-``: JSON Lines on stdin."""
    if is_parquet(path):
        return read_parquet(path)
    return read_csv(path) if is_csv(path) else read_jsonl(path)


def read_csv(path: str | Path) -> Iterator[dict[str, Any] | InvalidInput]:
    """One mapping per row, keyed by the header; an empty cell is a missing value (CSV has no null).
    A cell that holds a JSON list (contexts) is decoded by the layout that reads it."""
    csv.field_size_limit(2**31 - 1)  # a row of contexts is easily over the default 128 KiB per cell
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            if None in row:
                yield InvalidInput(id=f"line-{reader.line_num}",
                                   message=f"line {reader.line_num} has more cells than the header has columns")
                continue
            yield {key: (value if value != "" else None) for key, value in row.items()}


def read_parquet(path: str | Path, batch_rows: int = 1024) -> Iterator[dict[str, Any]]:
    """One mapping per row, read a batch of rows at a time, so a file of any size streams."""
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise missing_extra("parquet", "reading Parquet files", error) from None
    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
        yield from batch.to_pylist()


def count_records(path: str | Path) -> int:
    """How many records a file holds (for a progress bar), without reading them into memory."""
    if is_parquet(path):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    if is_csv(path):
        return sum(1 for _ in read_csv(path))
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip(_BLANK))


def keys_with_values(rows: Iterable[Mapping[str, Any] | InvalidInput]) -> set[str]:
    """The keys that carry a value in at least one of ``rows`` (an empty CSV column names no layout)."""
    return {key for row in rows if not isinstance(row, InvalidInput) for key, value in row.items() if value is not None}


@dataclass
class LayoutRows:
    """A file's rows under groundtrace's names, and the layout they were read with (None: the file has
    no rows to tell it by: it is empty, or no line of it is a JSON object)."""

    layout: Layout | None
    rows: Iterator[Mapping[str, Any] | InvalidInput]


def map_rows(rows: Iterable[Mapping[str, Any] | InvalidInput], schema: str | None = None,
             where: str = "the records", require_answer: bool = True) -> LayoutRows:
    """``rows`` in groundtrace's names, through the layout ``schema`` names or the one their keys fit
    (:func:`groundtrace.io.layouts.resolve`). A :class:`~groundtrace.io.layouts.LayoutError` is raised here,
    before any row is handed on: a file in no layout, or in two, is never scored into empty scores.
    ``require_answer=False``: a file of labels (id, label, spans), which may hold no answer at all."""
    iterator = iter(rows)
    head: list[Mapping[str, Any] | InvalidInput] = []
    valid = 0
    for row in iterator:  # up to DETECTION_ROWS rows that are records (a line that is not JSON tells nothing)
        head.append(row)
        valid += not isinstance(row, InvalidInput)
        if valid >= DETECTION_ROWS:
            break
    if not valid:
        return LayoutRows(None, iter(head))
    layout = resolve(keys_with_values(head), schema, where, require_answer)
    return LayoutRows(layout, (row if isinstance(row, InvalidInput) else layout.to_fields(row)
                               for row in chain(head, iterator)))


def read_layout(path: str | Path, schema: str | None = None, require_answer: bool = True) -> LayoutRows:
    """The records of a file (JSON Lines, CSV or Parquet; ``-``: JSON Lines on stdin) in groundtrace's
    names, whatever layout the file is in (see :func:`map_rows`)."""
    return map_rows(read_records(path), schema, f"the records of {path}", require_answer)


def write_jsonl(rows: Iterable[ScoredRecord], handle: TextIO) -> int:
    count = 0
    for row in rows:
        handle.write(row.model_dump_json() + "\n")
        count += 1
    return count


def read_scored(path: str | Path, skipped: list[str] | None = None) -> Iterator[ScoredRecord]:
    """The scored records of a scores file. A line that is not one (a write a crash cut short, a line of another
    file) is skipped wherever it is: its number and why go to ``skipped``, and one WARNING says them at the end,
    never the line's text (it is the user's). A file with lines but no scored record raises ValueError."""
    problems: list[str] = [] if skipped is None else skipped
    read = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip(_BLANK):
                continue
            try:
                row = ScoredRecord.model_validate_json(raw.decode("utf-8", "replace"))
            except ValidationError as error:
                problems.append(f"line {number}: {why_not_scored(error)}")
                continue
            read += 1
            yield row
    if problems and not read:
        raise ValueError(f"{path} holds no scored record ({problems[0]}): is it a scores file "
                         "(`groundtrace score -o`, the default store)?")
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        log.warning("groundtrace: %s: skipped %d line(s) that are not scored records (%s)", path, len(problems), shown)


def why_not_scored(error: ValidationError) -> str:
    """Why a line is not a scored record, in the error's own words, without the input it quotes."""
    first = error.errors(include_input=False, include_url=False)[0]
    if first["type"] == "json_invalid":
        said = re.sub(r" at line \d+ column \d+", "", first["msg"].removeprefix("Invalid JSON: "))
        return f"not valid JSON ({said})"
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]
