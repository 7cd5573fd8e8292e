"""Throughput of the offline metrics on one CPU core, on the records of a labelled file.

    python benchmarks/throughput.py [FILE] [--repeat N]

Pins the process to one core and BLAS to one thread, loads every model first, clears the caches,
then scores every record once per metric and prints records/s. Contexts repeat across records of
one source, as they do in a real RAG corpus, and the embedding cache reuses them within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth_qa_dev.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", default=str(DEFAULT))
    parser.add_argument("--metrics", default="lexical,facts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per metric; the median is reported")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    from groundtrace.measure.bench import _reset_caches
    from groundtrace.scoring.engine import build_metrics
    from groundtrace.metrics import lexical
    from groundtrace.text.facts import context_index

    rows = [json.loads(line) for line in open(args.file, encoding="utf-8")]
    chars = statistics.median(len(r["answer"]) + sum(map(len, r["contexts"])) for r in rows)
    print(f"{Path(args.file).name}: {len(rows)} records, median {chars:.0f} characters (answer + contexts); "
          f"1 core, {platform.processor() or platform.machine()}")
    for metric in build_metrics(args.metrics):
        metric.score(rows[0])  # load models and dictionaries outside the timing
        rates = []
        for _ in range(args.repeat):
            _reset_caches(metric)
            lexical._context_terms.cache_clear()
            context_index.cache_clear()
            started = time.perf_counter()
            for row in rows:
                metric.score(row)
            rates.append(len(rows) / (time.perf_counter() - started))
        print(f"{metric.name:10s} {statistics.median(rates):8.1f} records/s  (runs: {', '.join(f'{r:.1f}' for r in rates)})")


if __name__ == "__main__":
    main()
