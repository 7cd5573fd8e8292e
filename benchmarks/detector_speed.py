"""Throughput and memory of the `grounding` detector on ragtruth-sized records.

    python benchmarks/detector_speed.py [--file ../shared/data/ragtruth_qa_dev.jsonl] [--limit 200]

1. The metric called directly, one record at a time, with 1 and with 2 onnxruntime threads
   (the cross-encoder keeps no cache between records: every record is read cold).
2. The callback path: a `Monitor(["grounding"])` (its default isolation: a scoring child process
   per worker) with 1 and 2 workers; records/s from the first submit until every record is scored.
Prints records/s, the mean characters and windows per record, and the peak resident memory of this
process and of the Monitor's children.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from groundtrace import Record
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor

DEFAULT = Path(__file__).parents[1] / ".." / "shared" / "data" / "ragtruth_qa_dev.jsonl"


def direct(rows: list[dict], threads: int) -> None:
    metric = get_metric("grounding", threads=threads)
    metric.score(rows[0])  # load the model outside the clock
    windows = 0
    started = time.perf_counter()
    for row in rows:
        score = metric.score(row)
        assert score.ok, score.error
        windows += score.details.get("windows", 0)
    seconds = time.perf_counter() - started
    print(f"metric, {threads} thread(s): {len(rows) / seconds:6.1f} records/s "
          f"({windows / len(rows):.2f} windows of <= 512 tokens per record)")


def monitored(rows: list[dict], workers: int) -> None:
    monitor = Monitor(["grounding"], workers=workers, queue_size=len(rows) + 1, flush_at_exit=False)
    try:
        monitor.submit(Record(**{k: rows[0][k] for k in ("question", "contexts", "answer")}))
        monitor.flush(timeout=300)  # children started and the model loaded
        started = time.perf_counter()
        for i, row in enumerate(rows):
            monitor.submit(Record(id=str(i), question=row["question"], contexts=row["contexts"], answer=row["answer"]))
        assert monitor.flush(timeout=1800)
        seconds = time.perf_counter() - started
        stats = monitor.stats
        print(f"Monitor, {workers} worker(s): {len(rows) / seconds:6.1f} records/s "
              f"(scored {stats.scored - 1}, failed {stats.failed}, dropped {stats.dropped})")
    finally:
        monitor.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", default=str(DEFAULT))
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()][: args.limit]
    chars = sum(len("".join(r["contexts"])) + len(r["answer"]) for r in rows) / len(rows)
    print(f"{len(rows)} records of {Path(args.file).name}, {chars:,.0f} characters of contexts + answer on average")
    for threads in (1, 2):
        direct(rows, threads)
    print(f"peak resident memory of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    for workers in (1, 2):
        monitored(rows, workers)
    print(f"peak resident memory of a Monitor child: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
