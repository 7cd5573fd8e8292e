"""How `grounding`'s cost grows with what was retrieved: one ragtruth answer scored against 1, 5, 10
and 20 passages (its own first, then passages of the records after it from other sources), under
each reading (evidence=all, select, auto).

    python benchmarks/detector_scale.py [--index 0] [--repeat 3] [--threads 1]

Prints seconds (the median of --repeat runs, caches cleared before each: cold) and encoder windows
per passage count and reading, and the cost ratio of 20 passages to 5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from grounding_cv import padded

from groundtrace.backends.embedders import get_embedder
from groundtrace.cli.common import json_or_text
from groundtrace.detector.evidence import clear_caches
from groundtrace.metrics import get_metric

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_qa_dev.jsonl"
COUNTS = (1, 5, 10, 20)


def timed(metric, record: dict, repeat: int) -> tuple[float, int]:
    seconds = []
    windows = 0
    for _ in range(repeat):
        clear_caches()
        get_embedder("use").clear_cache()
        started = time.perf_counter()
        score = metric.score(record)
        seconds.append(time.perf_counter() - started)
        assert score.ok, score.error
        windows = score.details["windows"]
    return statistics.median(seconds), windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(DEFAULT))
    parser.add_argument("--index", type=int, default=0, help="which record's answer")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--readings", default="all,select,auto")
    parser.add_argument("-O", "--option", action="append", default=[], help="KEY=VALUE for the selecting readings")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()]
    extra = {k: json_or_text(v) for k, _, v in (o.partition("=") for o in args.option)}
    readings = {mode: {"evidence": mode, **(extra if mode != "all" else {})} for mode in args.readings.split(",")}
    print(f"record {rows[args.index]['id']}: answer of {len(rows[args.index]['answer'])} characters, "
          f"{args.threads} thread(s), median of {args.repeat} cold runs")
    for name, options in readings.items():
        metric = get_metric("grounding", threads=args.threads, **options)
        metric.score({**rows[args.index], "contexts": padded(rows, args.index, 1)})  # load the model outside the clock
        cost = {}
        for count in COUNTS:
            record = {**rows[args.index], "contexts": padded(rows, args.index, count)}
            seconds, windows = timed(metric, record, args.repeat)
            cost[count] = seconds
            chars = sum(len(c) for c in record["contexts"])
            print(f"  evidence={name:6s} {count:2d} passages ({chars:6,d} characters): {seconds:6.3f} s, {windows:2d} windows")
        print(f"  evidence={name}: 20 passages cost {cost[20] / cost[5]:.2f}x five")
    print(f"(windows are up to {512} tokens; a select window is often shorter: its cost is its length)")


if __name__ == "__main__":
    main()
