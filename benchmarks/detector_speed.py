"""Throughput and memory of the `grounding` detector on ragtruth-sized records.

    python benchmarks/detector_speed.py [--file ../shared/data/ragtruth_qa_dev.jsonl] [--threads 1]

Two passes over the file, one process, one scoring thread:
- "as in the file": RAGTruth has ~5.6 answers per retrieval result, and the detector caches each
  contexts' sentences, embeddings and facts, as it does in an application that scores several
  answers (or several metrics) per retrieval;
- "every context new": caches cleared before every record, the worst case.
Prints records/s, mean characters of context, and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from groundtrace.detector.features import clear_context_views
from groundtrace.metrics import get_metric


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", default=str(Path(__file__).parents[1] / ".." / "shared" / "data" / "ragtruth_qa_dev.jsonl"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()]
    metric = get_metric("grounding", threads=args.threads)
    metric.score(rows[0])
    chars = sum(len("".join(r["contexts"])) for r in rows) / len(rows)
    for label, cold in (("as in the file", False), ("every context new", True)):
        metric.reset_caches()
        metric.embedder.clear_cache()
        started = time.perf_counter()
        for row in rows:
            if cold:
                clear_context_views()
                metric.embedder.clear_cache()
            score = metric.score(row)
            assert score.ok, score.error
        seconds = time.perf_counter() - started
        print(f"{label:18s}: {len(rows) / seconds:6.1f} records/s ({len(rows)} records, {chars:,.0f} characters of context on average)")
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
