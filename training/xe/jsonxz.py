"""Example sets as xz-compressed JSON Lines: written once on the CPU (examples.py), read wherever
training runs (run.py). Standard library only, so the training machine needs nothing more."""

from __future__ import annotations

import json
import lzma
from pathlib import Path


def write_xz(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8", preset=9) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_xz(path: Path) -> list[dict]:
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
