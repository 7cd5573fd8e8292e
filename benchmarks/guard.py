"""The latency a guard adds to a request (groundtrace.guard, docs/how-to/guard.md), p50 and p99 per metric and per
shape, against two baselines measured in the same run, on ragtruth-sized records.

    python benchmarks/guard.py [--file ../shared/data/ragtruth_qa_dev.jsonl] [--rows 40] [--warmup 3]
        [--metrics lexical,facts,grounding] [--shapes long,short,stream] [--chunk 8] [--cores 1] [--threads 1]
        [--warm-caches] [--profile grounding]

Shapes:
  long    guard.check(question, contexts, answer) on a whole ragtruth answer (policy flag)
  short   guard.check on the first two sentences of the same answers (one where the answer has one)
  stream  guard.stream(question, contexts, chunks) under policy redact (every sentence checked before it is sent),
          the answer cut into --chunk characters; per sentence, the wait from the chunk that ends it (the one
          that begins the next sentence, or the stream's end) being fed until the sentence is yielded (or, for a
          redacted one, until the guard asks for the next chunk)
Arms, in a fresh random order for every row and shape, so that load on a shared machine falls on all alike:
  no guard   the request alone: a function that returns the answer / a generator that yields the chunks
  no-op      a Guard whose metric returns Result(0.0) at once (Metric.score's own checks and language guess run):
             the guard's own cost (a Record, the pool thread, the decision, the sentence splitting of a stream)
  METRIC     a Guard with that metric ("added over no-op" is the metric's share)
Every request is read cold, as one with new contexts would be: groundtrace's text caches (embeddings, tokenized
and fact-read sentences) are cleared before each, outside the clock (--warm-caches keeps them: an app whose
passages recur). The first --warmup requests of each arm (on rows outside those measured) are not counted; the
very first call of each metric, which loads its model, is reported apart.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).parents[1] / ".." / "shared" / "data" / "ragtruth_qa_dev.jsonl"
SHAPES = ("long", "short", "stream")
SHAPE_NAMES = {"long": "check, ragtruth answer", "short": "check, 1-2 sentences", "stream": "stream, per sentence"}
# the goal (added over no guard, ms): grounding on a ragtruth-sized answer, lexical on the same
GOALS = {"grounding": (150.0, 400.0), "lexical": (5.0, None)}
# groundtrace's caches keyed by text (module, function with cache_clear): cleared for a cold read
TEXT_CACHES = (("groundtrace.detector.claim_features", "_contexts"), ("groundtrace.text.facts", "context_index"),
               ("groundtrace.text.stated", "stated"), ("groundtrace.text.anchors", "content_words"),
               ("groundtrace.text.conflicts", "_evidence"), ("groundtrace.metrics.lexical", "_context_terms"))


def restrict_cores(cores: int) -> None:
    """This process (and every thread it starts from now on: call it before numpy and onnxruntime start theirs)
    on its first ``cores`` allowed CPUs."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores > len(allowed):
        raise SystemExit(f"--cores {cores}: only {len(allowed)} CPU(s) are allowed here")
    os.sched_setaffinity(0, allowed[:cores])


def cold_caches() -> None:
    import importlib

    from groundtrace.backends import embedders
    from groundtrace.detector.evidence import clear_caches

    clear_caches()
    for embedder in list(getattr(embedders, "_shared", {}).values()):
        embedder.clear_cache()
    for module, name in TEXT_CACHES:
        cached = getattr(importlib.import_module(module), name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


def noop_metric() -> Any:
    from groundtrace.metrics.base import Metric, Result

    class Noop(Metric):
        """Reads nothing: what is left of a check is the guard's own work (and Metric.score's)."""

        name, higher_is_better, default_threshold = "noop", False, 0.5

        def compute(self, record: Any, language: str) -> Any:
            return Result(0.0, "ok")

    return Noop()


def short_answer(answer: str) -> str:
    from groundtrace.text.sentences import split_sentences

    sentences = split_sentences(answer)
    return answer[: sentences[min(2, len(sentences)) - 1].end] if sentences else answer


def chunked(answer: str, size: int) -> list[str]:
    return [answer[i: i + size] for i in range(0, len(answer), size)]


def sentence_ends(chunks: list[str]) -> tuple[list[int], int]:
    """How many sentences a guarded stream checks on each chunk being fed (a sentence is checked once the next one
    has begun: GuardedStream's rule), and whether one is left for the stream's end."""
    from groundtrace.text.sentences import split_sentences

    counts, buffer = [], ""
    for chunk in chunks:
        buffer, n = buffer + chunk, 0
        while len(sentences := split_sentences(buffer)) >= 2:
            buffer, n = buffer[sentences[1].start:], n + 1
        counts.append(n)
    return counts, int(bool(buffer))


# ------------------------------------------------------------------------------------------- the requests
def timed_check(guard: Any, row: dict, answer: str) -> float:
    def request() -> str:  # the model's answer, already there
        return answer

    started = time.perf_counter()
    text = request()
    if guard is not None:
        guard.check(row["question"], row["contexts"], text)
    return time.perf_counter() - started


def stream_waits(guard: Any, row: dict, answer: str, size: int) -> tuple[list[float], int]:
    """The wait of each sentence (seconds), and how many sentences the guard says it checked (-1: no guard)."""
    chunks = chunked(answer, size)
    ends, last = sentence_ends(chunks)
    events: list[tuple[str, float]] = []

    def model() -> Iterator[str]:
        for chunk in chunks:
            events.append(("fed", time.perf_counter()))
            yield chunk
            events.append(("pulled", time.perf_counter()))
        events.append(("exhausted", time.perf_counter()))

    stream = model() if guard is None else guard.stream(row["question"], row["contexts"], model())
    pieces = iter(stream)
    while True:
        try:
            next(pieces)
        except StopIteration:
            events.append(("end", time.perf_counter()))
            break
        events.append(("piece", time.perf_counter()))
    waits: list[float] = []
    fed, pending, start = 0, 0, 0.0
    for kind, at in events:
        if kind == "fed":
            pending, start, fed = ends[fed], at, fed + 1
        elif kind == "exhausted":
            pending, start = last, at
        elif kind == "piece" and pending:
            waits.append(at - start)
            pending, start = pending - 1, at
        elif kind in ("pulled", "end") and pending:  # redacted: nothing was yielded for it
            waits += [(at - start) / pending] * pending
            pending = 0
    checked = -1 if guard is None else int(stream.decision.reason.split()[0])
    return waits, checked


# ------------------------------------------------------------------------------------------- the numbers
def percentile(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def ms(seconds: float) -> str:
    return f"{1000 * seconds:9.2f}" if seconds >= 0.0005 or seconds <= -0.0005 else f"{1000 * seconds:9.4f}"


def machine(args: argparse.Namespace) -> list[str]:
    try:
        commit = subprocess.run(["git", "-C", str(Path(__file__).parents[1]), "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [f"date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
            f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}",
            f"machine: {platform.machine()} {platform.processor() or ''}, os.cpu_count() {os.cpu_count()}, "
            f"affinity {sorted(os.sched_getaffinity(0))}" + (f" (--cores {args.cores})" if args.cores else ""),
            f"python {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
            f"groundtrace at {commit}; load average at the start {load}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=str(DEFAULT))
    parser.add_argument("--rows", type=int, default=40, help="records measured (each in every shape and arm)")
    parser.add_argument("--warmup", type=int, default=3, help="requests per arm and shape not counted")
    parser.add_argument("--metrics", default="lexical,facts,grounding")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--chunk", type=int, default=8, help="characters per streamed chunk")
    parser.add_argument("--cores", type=int, default=None, help="restrict the process to this many CPUs")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads of grounding's cross-encoder "
                        "(default: the guard's own, the process's cores up to 4; the sentence embedder keeps its 1)")
    parser.add_argument("--warm-caches", action="store_true", help="keep groundtrace's text caches between requests")
    parser.add_argument("--profile", default=None, metavar="METRIC",
                        help="then cProfile METRIC's reads of the long answers (in this thread) and print the top")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    metrics_wanted = [m for m in args.metrics.split(",") if m]
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown := set(shapes) - set(SHAPES):
        parser.error(f"unknown shapes {sorted(unknown)}: choose from {SHAPES}")
    if args.cores:
        restrict_cores(args.cores)
    threads = args.threads or max(1, min(4, len(os.sched_getaffinity(0))))  # what groundtrace.guard() reads on
    began = time.perf_counter()
    print("\n".join(machine(args)), flush=True)

    imported = time.perf_counter()
    import groundtrace
    from groundtrace.metrics import get_metric

    imported = time.perf_counter() - imported
    every = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()]
    if len(every) < 2:
        raise SystemExit(f"{args.file}: too few records")
    rows = every[: min(args.rows, len(every) - 1)]
    spare = every[len(rows):] or every
    warmups = [spare[i % len(spare)] for i in range(args.warmup)]
    metrics = {name: get_metric(name, **({"threads": threads} if name == "grounding" else {}))
               for name in metrics_wanted}
    check_guards = {"no guard": None, "no-op": groundtrace.guard([noop_metric()], policy="flag"),
                    **{name: groundtrace.guard([metric], policy="flag") for name, metric in metrics.items()}}
    stream_guards = {"no guard": None, "no-op": groundtrace.guard([noop_metric()], policy="redact"),
                     **{name: groundtrace.guard([metric], policy="redact") for name, metric in metrics.items()}}
    chars = statistics.mean(len(r["answer"]) for r in rows)
    contexts = statistics.mean(len("".join(r["contexts"])) for r in rows)
    short_chars = statistics.mean(len(short_answer(r["answer"])) for r in rows)
    print(f"{len(rows)} records of {Path(args.file).name}: answers {chars:,.0f} characters on average (short: "
          f"{short_chars:,.0f}), contexts {contexts:,.0f}; stream chunks of {args.chunk} characters; check under "
          f"policy flag, stream under redact; caches {'kept' if args.warm_caches else 'cleared before each request'}")
    print(f"threads: grounding's cross-encoder {threads} (onnxruntime), sentence embedder 1; "
          f"import groundtrace {1000 * imported:.0f} ms", flush=True)

    # the first call of each metric loads its model (the sentence embedder, should two metrics use it, loads in the
    # first of them: grounding's default reading does not)
    first: dict[str, float] = {}
    for name in metrics:
        cold_caches()
        first[name] = timed_check(check_guards[name], warmups[0] if warmups else rows[0],
                                  (warmups[0] if warmups else rows[0])["answer"])

    def one(shape: str, arm: str, row: dict) -> tuple[list[float], int]:
        if not args.warm_caches:
            cold_caches()
        if shape == "long":
            return [timed_check(check_guards[arm], row, row["answer"])], -1
        if shape == "short":
            return [timed_check(check_guards[arm], row, short_answer(row["answer"]))], -1
        return stream_waits(stream_guards[arm], row, row["answer"], args.chunk)

    arms = list(check_guards)
    for row in warmups:
        for shape in shapes:
            for arm in arms:
                one(shape, arm, row)
    torch = sys.modules.get("torch")
    if torch is not None:  # nothing here should load it; if something did, its threads are bounded as asked
        torch.set_num_threads(args.cores or threads)
    warmed = time.perf_counter()
    results: dict[tuple[str, str], list[float]] = defaultdict(list)
    mismatched = 0
    order = random.Random(args.seed)
    for row in rows:
        for shape in shapes:
            for arm in order.sample(arms, len(arms)):
                waits, checked = one(shape, arm, row)
                results[shape, arm] += waits
                if shape == "stream" and checked >= 0 and checked != len(waits):
                    mismatched += 1
    measured = time.perf_counter() - warmed

    print()
    print(f"warm-up: {args.warmup} request(s) per arm and shape, not counted; first call of each metric (loads its "
          "model; cold caches):")
    for name, seconds in first.items():
        steady = percentile(results["long", name], 50) if results["long", name] else 0.0
        loading = 1000 * (seconds - steady)
        print(f"  {name:<10} first call {1000 * seconds:8.0f} ms  (" + (f"about {loading:.0f} ms of loading over a "
              "measured long check's p50)" if loading >= 1 else "no loading to speak of)"))
    header = f"{'shape':<24}| {'metric':<10}|{'n':>6} |{'p50 ms':>9} |{'p99 ms':>9} | {'added p50 over':>14} | " \
             f"{'added p50 over':>14}"
    print()
    print(header)
    print(f"{'':<24}| {'':<10}|{'':>6} |{'':>9} |{'':>9} | {'no guard':>14} | {'no-op':>14}")
    print("-" * len(header))
    for shape in shapes:
        base = results[shape, "no guard"]
        noop = results[shape, "no-op"]
        for arm in arms:
            values = results[shape, arm]
            if not values:
                continue
            p50, p99 = percentile(values, 50), percentile(values, 99)
            over_none = ms(p50 - percentile(base, 50)) if arm != "no guard" else f"{'':>9}"
            over_noop = ms(p50 - percentile(noop, 50)) if arm not in ("no guard", "no-op") else f"{'':>9}"
            print(f"{SHAPE_NAMES[shape]:<24}| {arm:<10}|{len(values):>6} |{ms(p50)} |{ms(p99)} | {over_none:>14} | "
                  f"{over_noop:>14}")
        print("-" * len(header))
    if mismatched:
        print(f"note: in {mismatched} stream(s) the guard checked another number of sentences than this script "
              "expected from its splitting: the per-sentence waits of those are approximate")

    print()
    print("goal (added over no guard, a ragtruth-sized answer checked whole):")
    for name, (goal50, goal99) in GOALS.items():
        if name not in metrics or "long" not in shapes:
            print(f"  {name}: not measured in this run")
            continue
        values, base = results["long", name], results["long", "no guard"]
        for label, q, goal in (("p50", 50, goal50), ("p99", 99, goal99)):
            if goal is None:
                continue
            added = 1000 * (percentile(values, q) - percentile(base, q))
            verdict = "meets" if added <= goal else f"misses by {added - goal:.1f} ms"
            print(f"  {name} {label}: adds {added:.1f} ms, goal at most {goal:.0f} ms: {verdict}")
    print(f"torch: {'loaded (threads set to ' + str(args.cores or threads) + ')' if torch is not None else 'not loaded'}"
          f"; {len(rows)} rows measured in {measured:.0f} s, {time.perf_counter() - began:.0f} s in all; load "
          f"average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    if args.profile:
        profile(metrics[args.profile] if args.profile in metrics else get_metric(args.profile), rows,
                args.warm_caches)


def profile(metric: Any, rows: list[dict], warm: bool, top: int = 12) -> None:
    """``metric``'s reads of the long answers in this thread (a guard reads in its pool's, out of cProfile's
    sight), the functions with the most cumulative time."""
    from groundtrace import Record

    profiler = cProfile.Profile()
    for row in rows:
        if not warm:
            cold_caches()
        record = Record(question=row["question"], contexts=row["contexts"], answer=row["answer"])
        profiler.enable()
        metric.score(record)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print()
    print(f"cProfile of {metric.name} on {len(rows)} long answers, by cumulative time:")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
