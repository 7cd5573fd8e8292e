"""Reading records and writing scored records as JSON Lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from groundtrace.record import InvalidInput
from groundtrace.score import ScoredRecord


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any] | InvalidInput]:
    """One mapping per non-blank line; a line that is not a JSON object becomes an InvalidInput.

    Undecodable bytes are replaced rather than fatal: one corrupt line must not lose the file.
    """
    handle: TextIO = sys.stdin if str(path) == "-" else open(path, encoding="utf-8", errors="replace")
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is not valid JSON ({error.msg})")
                continue
            if not isinstance(value, dict):
                yield InvalidInput(id=f"line-{number}", message=f"line {number} is a JSON {type(value).__name__}, not an object")
                continue
            yield value


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
