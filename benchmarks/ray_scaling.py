"""Throughput of the Ray engine against the local one, and what N nodes would do.

    python benchmarks/ray_scaling.py [FILE] [--metric grounding] [--limit 100] [--actors 1,2] [--json]

Scores the first LIMIT records of FILE (default: shared/data/ragtruth_qa_dev.jsonl) with METRIC
three ways: the local engine in this process (one thread, the model loaded before the clock
starts), then groundtrace.ray.score_records on a local Ray cluster with 1 and with 2 actors of one
CPU each (the clock includes starting the actors and loading their models, as a real run pays it;
"steady" excludes everything before the first result). While Ray scores, every actor's resident
memory is sampled twice a second; its peak is reported per actor. The projection for N nodes
assumes throughput adds up across nodes (records are independent; the driver only moves JSON):
N x actors per node x the steady records/s of one actor, times the 2-actor efficiency measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import threading
import time
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth_qa_dev.jsonl"


def load(path: str, limit: int) -> list[dict]:
    from groundtrace.io import read_jsonl

    return list(islice(read_jsonl(path), limit))


def run_local(rows: list[dict], metric: str) -> dict:
    from groundtrace.scoring.engine import Evaluator

    evaluator = Evaluator([metric])
    evaluator.score_one({"answer": "warm up", "contexts": ["warm up"]})  # load the model off the clock
    started = time.perf_counter()
    scored = list(evaluator.iter_evaluate(rows))
    seconds = time.perf_counter() - started
    return {"engine": "local", "actors": None, "records": len(scored), "seconds": seconds,
            "records_per_s": len(scored) / seconds, "steady_records_per_s": len(scored) / seconds,
            "startup_s": 0.0, "peak_rss_mb_per_actor": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "errors": sum(not s.ok for r in scored for s in r.scores)}


class ActorMemory:
    """Peak resident memory of every live scoring actor, sampled in the background."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.peak: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil
        from ray._private import state  # the cluster's actor table, without the dashboard

        while not self._stop.is_set():
            try:
                for actor in state.actors().values():
                    if actor["State"] == "ALIVE" and "BatchScorer" in actor["ActorClassName"] and actor["Pid"]:
                        rss = psutil.Process(actor["Pid"]).memory_info().rss / 2**20
                        self.peak[actor["Pid"]] = max(self.peak.get(actor["Pid"], 0.0), rss)
            except Exception:
                pass  # an actor that just ended; the next sample sees the rest
            self._stop.wait(self.every_s)

    def __enter__(self) -> ActorMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_ray(rows: list[dict], metric: str, actors: int, batch_size: int) -> dict:
    from groundtrace.ray import score_records

    arrivals: list[float] = []
    started = time.perf_counter()
    with ActorMemory() as memory:
        scored = list(score_records(rows, [metric], actors=actors, batch_size=batch_size,
                                    on_result=lambda _: arrivals.append(time.perf_counter())))
    seconds = time.perf_counter() - started
    first = arrivals[0] - started
    # steady: the records after the first batch, over the time after it arrived
    after = [t for t in arrivals if t > arrivals[0]]
    steady = len(after) / (arrivals[-1] - arrivals[0]) if len(after) > 1 else len(scored) / seconds
    return {"engine": "ray", "actors": actors, "records": len(scored), "seconds": seconds,
            "records_per_s": len(scored) / seconds, "steady_records_per_s": steady, "startup_s": first,
            "peak_rss_mb_per_actor": max(memory.peak.values()) if memory.peak else None,
            "errors": sum(not s.ok for r in scored for s in r.scores)}


def projection(results: list[dict], node_cores: int, nodes: list[int]) -> dict:
    one = next(r for r in results if r["actors"] == 1)
    two = next((r for r in results if r["actors"] == 2), None)
    per_actor = one["steady_records_per_s"]
    efficiency = min(1.0, two["steady_records_per_s"] / (2 * per_actor)) if two else 1.0
    rows = [{"nodes": n, "actors": n * node_cores, "records_per_s": n * node_cores * per_actor * efficiency,
             "hours_per_million": 1e6 / (n * node_cores * per_actor * efficiency) / 3600} for n in nodes]
    return {"per_actor_records_per_s": per_actor, "two_actor_efficiency": efficiency, "node_cores": node_cores,
            "nodes": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT))
    parser.add_argument("--metric", default="grounding")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--actors", default="1,2", help="comma-separated actor counts")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--node-cores", type=int, default=16, help="cores per node in the projection")
    parser.add_argument("--nodes", default="1,4,16,64", help="node counts in the projection")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = parser.parse_args()

    import ray

    rows = load(args.file, args.limit)
    chars = statistics.median(len(r.get("answer") or "") + sum(map(len, r.get("contexts") or [])) for r in rows)
    results = [run_local(rows, args.metric)]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        for actors in [int(a) for a in args.actors.split(",")]:
            results.append(run_ray(rows, args.metric, actors, args.batch_size))
    finally:
        ray.shutdown()
    report = {
        "file": Path(args.file).name, "records": len(rows), "median_chars": chars, "metric": args.metric,
        "batch_size": args.batch_size, "machine": f"{os.cpu_count()}-core {platform.machine()}, {platform.system()}",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "ray": ray.__version__, "results": results,
        "projection": projection(results, args.node_cores, [int(n) for n in args.nodes.split(",")]),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['file']}: {len(rows)} records, median {chars:.0f} characters; metric {args.metric}; "
          f"{report['machine']}; ray {ray.__version__}; {report['date']}")
    print(f"{'engine':<8}{'actors':>7}{'rec/s':>9}{'steady':>9}{'start s':>9}{'peak RSS MB':>13}{'errors':>8}")
    for r in results:
        rss = "—" if r["peak_rss_mb_per_actor"] is None else f"{r['peak_rss_mb_per_actor']:.0f}"
        print(f"{r['engine']:<8}{r['actors'] or '—':>7}{r['records_per_s']:>9.2f}{r['steady_records_per_s']:>9.2f}"
              f"{r['startup_s']:>9.1f}{rss:>13}{r['errors']:>8}")
    p = report["projection"]
    print(f"\nprojection: {p['per_actor_records_per_s']:.2f} records/s per actor, 2-actor efficiency "
          f"{p['two_actor_efficiency']:.2f}, {p['node_cores']} actors per node")
    print(f"{'nodes':>6}{'actors':>8}{'records/s':>11}{'h per 1M':>10}")
    for n in p["nodes"]:
        print(f"{n['nodes']:>6}{n['actors']:>8}{n['records_per_s']:>11.1f}{n['hours_per_million']:>10.1f}")


if __name__ == "__main__":
    main()
