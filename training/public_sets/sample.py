"""A fixed sample of a .jsonl.xz record file as plain JSON Lines, for `groundtrace bench` (which reads
plain files) when scoring the whole file would take too long on a small machine.

    python -m training.public_sets.sample training/data/public/begin_heldout.jsonl.xz OUT.jsonl --limit 400

The sample is the ``limit`` records whose seeded hash of ``id`` is smallest: the same every run,
whatever the order of the file; a file of ``limit`` records or fewer is copied whole.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from training.xe.jsonxz import read_xz


def sample(rows: list[dict], limit: int, seed: int = 0) -> list[dict]:
    if len(rows) <= limit:
        return rows
    chosen = set(sorted(range(len(rows)), key=lambda i: hashlib.sha1(f"{seed}:{rows[i]['id']}".encode()).hexdigest())
                 [:limit])
    return [row for i, row in enumerate(rows) if i in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = sample(read_xz(args.source), args.limit, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print(f"{len(rows)} records ({sum(r['label'] for r in rows)} hallucinated) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
