"""Would batching the checks of concurrent requests lower the guard's latency? Two requests arrive together; each
is either read by its own cross-encoder run, both at once on the pool's threads (what the guard does), or the two
requests' windows go in one batched run (what a batcher would do). Prints each request's wait, p50 / p95 / max.

    python benchmarks/guard_batching.py [--rows 40] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ragtruth_qa_dev.jsonl"


def percentiles(waits: list[float]) -> str:
    waits = sorted(waits)
    return (f"p50 {waits[len(waits) // 2] * 1000:6.0f}  p95 {waits[int(len(waits) * 0.95)] * 1000:6.0f}  "
            f"max {waits[-1] * 1000:6.0f} ms")


def waited(model: object, windows: list, began: float) -> float:
    model.window_probabilities(windows)  # type: ignore[attr-defined]
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(DEFAULT))
    parser.add_argument("--rows", type=int, default=40, help="records, taken two by two")
    parser.add_argument("--threads", default="2,1", help="onnxruntime threads per run, each measured")
    args = parser.parse_args()
    from groundtrace.detector.crossencoder import shared_crossencoder

    rows = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()][: args.rows // 2 * 2]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {len(rows)} records of {Path(args.file).name}; "
          f"cores {len(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.2f}")
    pool = ThreadPoolExecutor(2)
    for threads in (int(t) for t in args.threads.split(",")):
        model = shared_crossencoder(threads)
        windows = [model.full_windows(r.get("question"), r["contexts"], r["answer"])[1] for r in rows]
        model.window_probabilities(windows[0])  # the load, not counted
        apart: list[float] = []
        together: list[float] = []
        for first, second in zip(windows[::2], windows[1::2], strict=True):
            began = time.perf_counter()
            runs = [pool.submit(waited, model, w, began) for w in (first, second)]
            apart += [run.result() for run in runs]
            began = time.perf_counter()
            model.window_probabilities(first + second)
            together += [time.perf_counter() - began] * 2  # both wait for the batch
        print(f"threads {threads}: each its own run, at once  {percentiles(apart)}")
        print(f"threads {threads}: one batched run of both     {percentiles(together)}")


if __name__ == "__main__":
    main()
