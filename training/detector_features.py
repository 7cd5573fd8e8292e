"""Feature rows of labelled records for training or measuring the grounding detector.

    python training/detector_features.py IN.jsonl [IN2.jsonl ...] --out FEATURES.npz [--limit N] [--workers 2]

A claim's label is 1 when a gold span of the record overlaps it; records without spans (HaluEval)
label every claim with the record's label.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time

import numpy as np

from groundtrace.backends.embedders import USEEmbedder
from groundtrace.detector.features import FEATURE_NAMES, answer_features
from groundtrace.text.lang import guess_language

_embedder = None


def _init() -> None:
    global _embedder
    _embedder = USEEmbedder(threads=1, cache_size=20000)


def claim_labels(claims, record) -> list[int]:
    spans = record.get("spans") or []
    if not spans:
        return [int(record["label"])] * len(claims)
    out = []
    for claim in claims:
        out.append(int(any(min(claim.end, s["end"]) - max(claim.start, s["start"]) > 0 for s in spans)))
    return out


def featurize(record: dict):
    language = record.get("language") or guess_language(record["answer"])
    claims, x = answer_features(record.get("question"), record["contexts"], record["answer"], language, _embedder)
    return x, claim_labels(claims, record), [(c.start, c.end) for c in claims]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for path in args.inputs:
        with open(path, encoding="utf-8") as f:
            part = [json.loads(line) for line in f if line.strip()]
        rows.extend(part[: args.limit] if args.limit else part)
    started = time.time()
    with mp.Pool(args.workers, initializer=_init) as pool:
        results = pool.map(featurize, rows, chunksize=16)
    xs, ys, groups, offsets = [], [], [], []
    for index, (x, y, spans) in enumerate(results):
        xs.append(x)
        ys.extend(y)
        groups.extend([index] * len(y))
        offsets.extend(spans)
    np.savez_compressed(
        args.out,
        X=np.concatenate(xs) if xs else np.zeros((0, len(FEATURE_NAMES)), np.float32),
        y=np.asarray(ys, np.int8),
        group=np.asarray(groups, np.int32),
        offsets=np.asarray(offsets, np.int32).reshape(-1, 2),
        record_label=np.asarray([int(r["label"]) for r in rows], np.int8),
        record_id=np.asarray([r["id"] for r in rows]),
        language=np.asarray([r.get("language") or "" for r in rows]),
        features=np.asarray(FEATURE_NAMES),
    )
    print(f"{len(rows)} records, {len(ys)} claims, {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
