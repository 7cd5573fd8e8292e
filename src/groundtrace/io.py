"""Reading records and writing scored records as JSON Lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from groundtrace._extras import missing_extra
from groundtrace.record import InvalidInput
from groundtrace.score import ScoredRecord


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
            if not isinstance(value, dict):
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is a JSON {type(value).__name__}, not an object")
                continue
            yield value


def is_parquet(path: str | Path) -> bool:
    return str(path).lower().endswith((".parquet", ".pq"))


def read_records(path: str | Path) -> Iterator[dict[str, Any] | InvalidInput]:
    """Records from JSON Lines, or from Parquet when the name ends in .parquet (one row per record,
    columns named like the JSON fields)."""
    return read_parquet(path) if is_parquet(path) else read_jsonl(path)


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
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip(_BLANK))


def write_jsonl(rows: Iterable[ScoredRecord], handle: TextIO) -> int:
    count = 0
    for row in rows:
        handle.write(row.model_dump_json() + "\n")
        count += 1
    return count


def read_scored(path: str | Path) -> Iterator[ScoredRecord]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                yield ScoredRecord.model_validate_json(line)
