"""How long a short script's exit waits for its answers to be scored: the measurement behind the default of
GROUNDTRACE_EXIT_FLUSH_S.

    python benchmarks/exit_flush.py [--runs 16] [--metrics grounding] [--busy]

Each run is a newcomer's script: one ``groundtrace.turn`` with a ``@groundtrace.retrieval`` function, the
default Monitor (its scoring process starts cold and loads the model), then the script ends. The exit flush's
time is read inside the script (atexit hooks around groundtrace's) with the bound raised to 300 s, so nothing is
cut. ``--busy`` keeps every core busy with other work while the scripts run (a loaded CI machine). Prints
each run's exit wait, then the median and the largest, and whether every record was scored.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import atexit, json, sys, time
marks = {}
atexit.register(lambda: print(json.dumps({"exit_wait_s": time.monotonic() - marks["exit"]}), file=sys.stderr))
import groundtrace

@groundtrace.retrieval
def search(question):
    return ["Refunds are paid within 14 days of the return reaching our warehouse."]

with groundtrace.turn("How long do refunds take?") as turn:
    search("How long do refunds take?")
    turn.answer = "Refunds are paid within 30 days."
atexit.register(lambda: marks.setdefault("exit", time.monotonic()))  # runs first: groundtrace's flush comes after
"""


def busy(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        sum(i * i for i in range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--metrics", default="grounding")
    parser.add_argument("--busy", action="store_true", help="load every core with other work meanwhile")
    args = parser.parse_args()
    burners = []
    if args.busy:
        stop_at = time.monotonic() + 3600
        burners = [multiprocessing.Process(target=busy, args=(stop_at,), daemon=True) for _ in range(os.cpu_count() or 1)]
        for burner in burners:
            burner.start()
    waits, scored = [], 0
    try:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                store = Path(folder) / "scores.jsonl"
                env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
                env.update(GROUNDTRACE_METRICS=args.metrics, GROUNDTRACE_JSONL_PATH=str(store),
                           GROUNDTRACE_EXIT_FLUSH_S="300")
                done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                                      timeout=600, cwd=folder)
                line = next(line for line in reversed(done.stderr.splitlines()) if line.startswith("{"))
                waits.append(json.loads(line)["exit_wait_s"])
                scored += store.exists() and len(store.read_text().splitlines()) == 1
                print(f"run {run + 1}: exit waited {waits[-1]:.2f} s")
    finally:
        for burner in burners:
            burner.terminate()
    print(f"{args.runs} runs ({'busy' if args.busy else 'idle'} machine, {os.cpu_count()} cores, {args.metrics}): "
          f"exit wait median {statistics.median(waits):.2f} s, largest {max(waits):.2f} s; "
          f"{scored}/{args.runs} records scored")


if __name__ == "__main__":
    main()
