"""Does a metric leave faithful paraphrases alone and catch one planted error? The hand-written pairs
of benchmarks/data/paraphrase_*.jsonl (never trained on): each faithful answer rewords its passages
the way an LLM does, its twin carries one planted error (baseless addition, number, entity,
contradiction, dropped condition) with the span marked.

    python benchmarks/paraphrase.py [-m grounding] [-O KEY=VALUE ...] [--threshold T] [--json] [FILES]

Per language, at the metric's threshold: share of faithful answers flagged, share of planted
errors caught, pairwise accuracy (the twin scores as more hallucinated than its faithful answer),
and span hits (a flagged span overlaps the planted span, among caught twins); then per error type.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from groundtrace.cli.common import json_or_text
from groundtrace.metrics import get_metric

DATA = Path(__file__).parent / "data"


def load(paths: list[Path]) -> list[tuple[dict, dict]]:
    pairs = []
    for path in paths:
        rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
        by_pair: dict[int, dict[int, dict]] = defaultdict(dict)
        for row in rows:
            by_pair[row["meta"]["pair"]][row["label"]] = row
        pairs += [(p[0], p[1]) for _, p in sorted(by_pair.items()) if 0 in p and 1 in p]
    return pairs


def hallucination(score, higher_is_better: bool) -> float:
    return 1.0 - score.value if higher_is_better else score.value


def overlaps(spans, gold) -> bool:
    return any(s.start < g["end"] and s.end > g["start"] for s in spans for g in gold)


def run(metric_name: str, threshold: float | None, paths: list[Path], options: dict | None = None) -> dict:
    metric = get_metric(metric_name, **(options or {}), **({"threshold": threshold} if threshold is not None else {}))
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for faithful, planted in load(paths):
        sf, sp = metric.score(faithful), metric.score(planted)
        if not (sf.ok and sp.ok):
            raise RuntimeError(f"{faithful['id']}: {sf.error or sp.error}")
        for group in (faithful["language"], f"{faithful['language']}/{planted['meta']['error_type']}", "all"):
            row = table[group]
            row["faithful_flagged"][0] += int(bool(sf.hallucinated))
            row["faithful_flagged"][1] += 1
            row["planted_caught"][0] += int(bool(sp.hallucinated))
            row["planted_caught"][1] += 1
            row["pairwise"][0] += int(hallucination(sp, metric.higher_is_better) > hallucination(sf, metric.higher_is_better))
            row["pairwise"][1] += 1
            if sp.hallucinated:
                row["span_on_planted"][0] += int(overlaps(sp.spans, planted["spans"]))
                row["span_on_planted"][1] += 1
    return {"metric": metric_name, "threshold": metric.threshold,
            "groups": {g: {k: {"hits": v[0], "of": v[1], "rate": round(v[0] / v[1], 3) if v[1] else None}
                           for k, v in row.items()} for g, row in sorted(table.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--metric", default="grounding")
    parser.add_argument("-O", "--option", action="append", default=[], help="an option of the metric, KEY=VALUE "
                        "(e.g. -m lettuce -O model=DIR)")
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    options = {key: json_or_text(value) for key, _, value in (pair.partition("=") for pair in args.option)}
    result = run(args.metric, args.threshold, args.files or sorted(DATA.glob("paraphrase_*.jsonl")), options)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['metric']} at threshold {result['threshold']:.3f}")
    print(f"{'group':28s} {'faithful flagged':>17s} {'planted caught':>15s} {'pairwise':>9s} {'span on planted':>16s}")
    for group, row in result["groups"].items():
        cells = [row.get(k, {"hits": 0, "of": 0}) for k in ("faithful_flagged", "planted_caught", "pairwise", "span_on_planted")]
        print(f"{group:28s} " + " ".join(f"{c['hits']:>5d}/{c['of']:<3d} ({c['hits'] / c['of'] if c['of'] else 0:4.0%})".rjust(w)
                                         for c, w in zip(cells, (17, 15, 9, 16), strict=True)))


if __name__ == "__main__":
    main()
