"""Throughput and memory of the `grounding` detector on ragtruth-sized records, under the full
reading (evidence=all: every context window) and evidence selection (evidence=select: the sentences
each claim picks, groundtrace/detector/evidence.py), measured in one run on one machine.

    python benchmarks/detector_speed.py [--file ../shared/data/ragtruth_qa_dev.jsonl] [--limit 200] \
        [--readings all,select,auto] [-O k=2] [--pad 20] [--no-monitor] [--compare DIR]

1. The metric called directly, one record at a time, with 1 and with 2 onnxruntime threads, once
   per reading, each (reading, threads) in a fresh child process (so each peak memory is what one
   scorer costs). Every record is read cold: the cross-encoder keeps no cache, and the selection's
   caches (tokenized sentences, embeddings) are cleared before each record. ``--compare DIR`` measures
   a second model's files (grounding-xe.onnx, grounding-xe.spm, grounding-xe-normalizer.json, e.g. an
   earlier version from git) the same way in the same run, alternating with the shipped one, and
   prints the ratio of records/s and of CPU per record. ``--compare grounding-2.1`` measures the shipped
   cross-encoder alone (claims="xe", without grounding-5's claim verdict) beside the shipped metric.
2. The callback path: a `Monitor(["grounding"])` (its default isolation: a scoring child process
   per worker, the metric's default reading) with 1 and 2 workers; records/s from the first submit
   until every record is scored.
Prints records/s, CPU milliseconds per record (all threads; what the reading costs, whatever else
runs on the machine), the mean characters, windows and encoder positions per record, the speed-up
of selection over the full reading, and the peak resident memory of each reading's process and of
the Monitor's children. ``--pad 20`` pads every record to 20 passages with other sources' passages
(a retrieved pile).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from grounding_cv import padded

from groundtrace import Record
from groundtrace.backends.embedders import get_embedder
from groundtrace.cli.common import json_or_text
from groundtrace.detector.crossencoder import CrossEncoder
from groundtrace.detector.evidence import clear_caches
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor

DEFAULT = Path(__file__).parents[1] / ".." / "shared" / "data" / "ragtruth_qa_dev.jsonl"
XE_ALONE = "grounding-2.1"  # --compare's name for the cross-encoder alone, read by the shipped model


def direct(rows: list[dict], threads: int, options: dict, model_dir: str | None = None) -> dict:
    model = None
    if model_dir == XE_ALONE:
        options = {**options, "claims": "xe"}
    elif model_dir:
        folder = Path(model_dir)
        model = CrossEncoder(folder / "grounding-xe.onnx", folder / "grounding-xe.spm",
                             folder / "grounding-xe-normalizer.json", threads=threads)
    metric = get_metric("grounding", threads=threads, model=model, **options)
    metric.score(rows[0])  # load the model outside the clock
    windows = tokens = 0
    started, cpu = time.perf_counter(), time.process_time()
    for row in rows:
        clear_caches()
        get_embedder("use").clear_cache()
        score = metric.score(row)
        assert score.ok, score.error
        windows += score.details.get("windows", 0)
        tokens += score.details.get("tokens", 0)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    reading = options.get("evidence", "default")
    # CPU seconds (all threads) are what the reading costs; wall records/s also count other work on the machine
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{model_dir or 'shipped'}, evidence={reading}, {threads} thread(s): {len(rows) / seconds:6.2f} records/s, "
          f"{1000 * cpu / len(rows):5.0f} CPU ms per record ({windows / len(rows):.2f} windows, "
          f"{tokens / len(rows):.0f} encoder positions per record), peak resident memory {peak:.0f} MB", flush=True)
    return {"rate": len(rows) / seconds, "cpu_ms": 1000 * cpu / len(rows), "peak_mb": peak}


def worker(rows: list[dict], work: dict) -> None:
    """One model, reading and thread count in this (child) process: prints a JSON line last."""
    print(json.dumps(direct(rows, work["threads"], work["options"], work.get("model_dir"))))


def monitored(rows: list[dict], workers: int) -> None:
    monitor = Monitor(["grounding"], "none", workers=workers, queue_size=len(rows) + 1, flush_at_exit=False)
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
    parser.add_argument("--readings", default="all,select", help="evidence readings, comma-separated")
    parser.add_argument("-O", "--option", action="append", default=[], help="KEY=VALUE for evidence=select")
    parser.add_argument("--no-monitor", action="store_true")
    parser.add_argument("--pad", type=int, default=0, help="pad every record to this many passages (other sources')")
    parser.add_argument("--compare", default=None, help="a folder with another model's files, measured beside the "
                        f"shipped one; {XE_ALONE}: the cross-encoder alone")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    every = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()]
    rows = every[: args.limit]
    if args.pad:  # a retrieved pile: each record's passages, then other sources' passages
        rows = [{**row, "contexts": padded(every, i, args.pad)} for i, row in enumerate(rows)]
    if args.worker == "monitor":
        for workers in (1, 2):
            monitored(rows, workers)
        print(f"peak resident memory of a Monitor child: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")
        return
    if args.worker:
        worker(rows, json.loads(args.worker))
        return
    chars = sum(len("".join(r["contexts"])) + len(r["answer"]) for r in rows) / len(rows)
    print(f"{len(rows)} records of {Path(args.file).name}, {chars:,.0f} characters of contexts + answer on average")
    extra = {k: json_or_text(v) for k, _, v in (o.partition("=") for o in args.option)}
    results = {}
    models = [None, args.compare] if args.compare else [None]
    for reading in args.readings.split(","):
        options = {"evidence": reading, **(extra if reading == "select" else {})}
        for threads in (1, 2):
            for model_dir in models:  # alternating, so both see the same load on the machine
                lines = child(args, json.dumps({"options": options, "threads": threads, "model_dir": model_dir}))
                print("\n".join(lines[:-1]), flush=True)
                results[model_dir, reading, threads] = json.loads(lines[-1])
    for threads in (1, 2):
        if (None, "all", threads) in results and (None, "select", threads) in results:
            ratio = results[None, "select", threads]["rate"] / results[None, "all", threads]["rate"]
            print(f"evidence=select / evidence=all, {threads} thread(s): {ratio:.2f}x records/s")
        for reading in args.readings.split(",") if args.compare else []:
            new, old = results[None, reading, threads], results[args.compare, reading, threads]
            print(f"shipped / {args.compare}, evidence={reading}, {threads} thread(s): {new['rate'] / old['rate']:.2f}x "
                  f"records/s, {old['cpu_ms'] / new['cpu_ms']:.2f}x less CPU per record")
    if not args.no_monitor:  # in a child of its own, so that its children's peak is theirs alone
        print("\n".join(child(args, "monitor")), flush=True)


def child(args: argparse.Namespace, work: str) -> list[str]:
    done = subprocess.run([sys.executable, __file__, "--file", args.file, "--limit", str(args.limit),
                           "--pad", str(args.pad), "--worker", work], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()


if __name__ == "__main__":
    main()
