"""How many labels until `fit` can run: the review queue's order against the one before it.

A reviewer labels the queue from the top; `fit` needs 30 labels with 8 of each kind (groundtrace.combine.fitting).
For each labelled file, the records are scored with one metric, shuffled (a live store holds them in arrival
order), ordered by the queue, and labelled in that order with their true labels until the progress says ready.
Printed: the labels needed, median and worst over seeds, for

    four lanes  the queue now: the nearest flagged and passed answers and the farthest of each, in turn
    near first  the queue before: the band around the threshold (nearest first), then the flagged (most confident
                first), then the rest; a file whose flagged answers are most of the band fills 30 with one kind

    python benchmarks/review_queue.py [--metric lexical] [--limit 400] [--seeds 20] [FILE ...]

Files default to the labelled dev sets in ../shared/data (HaluEval QA, RAGTruth QA, HalluQA, UHGEval).
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path

from groundtrace.measure.bench import load_labelled
from groundtrace.metrics import get_metric
from groundtrace.record import Record
from groundtrace.io.labels import decide
from groundtrace.review.queue import BAND, Filters, progress, queue
from groundtrace.score import Score, ScoredRecord

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FILES = ["halueval_qa_dev.jsonl", "ragtruth_qa_dev.jsonl", "halluqa_zh.jsonl", "uhgeval_zh_dev.jsonl"]


def before(rows: list[ScoredRecord]) -> list[str]:
    """The queue's order before: near band (nearest first), flagged (most confident first), the rest."""
    def placed(score: Score) -> tuple[int, float]:
        if score.ok and score.threshold is not None and score.value is not None:
            distance = abs(score.value - score.threshold)
            if distance <= BAND:
                return 0, distance
        if score.ok and score.hallucinated:
            return 1, 1.0 - (score.hallucination_score or 0.0)
        return 2, 1.0
    return [row.id for row in sorted(rows, key=lambda row: min(placed(s) for s in row.scores))]


def labels_until_ready(order: list[str], truth: dict[str, int]) -> int | None:
    decisions = {}
    for count, key in enumerate(order, 1):
        decisions[key] = decide(key, "unsupported" if truth[key] else "supported")
        if progress(decisions, dict.fromkeys(truth)).ready:
            return count
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*")
    parser.add_argument("--metric", default="lexical")
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    metric = get_metric(args.metric)
    print(f"labels until fit can run (30, 8 of each), {args.metric}, first {args.limit} records, {args.seeds} shuffles")
    print(f"{'file':28} {'records':>7} {'unsupported':>11} {'four lanes: median':>18} {'worst':>6} "
          f"{'near first: median':>19} {'worst':>6}")
    for name in args.files or FILES:
        path = Path(name) if Path(name).exists() else SHARED / name
        items = load_labelled(path, limit=args.limit)
        rows = []
        for item in items:
            record = Record.model_validate({k: v for k, v in item.raw.items() if k in Record.model_fields})
            rows.append(ScoredRecord(record=record, scores=[metric.score(record)]))
        truth = {row.id: item.label for row, item in zip(rows, items, strict=True)}
        now, then = [], []
        for seed in range(args.seeds):
            shuffled = rows[:]
            random.Random(seed).shuffle(shuffled)
            now.append(labels_until_ready([item.id for item in queue(shuffled, Filters(), {})], truth))
            then.append(labels_until_ready(before(shuffled), truth))

        def said(counts: list[int | None]) -> tuple[str, str]:
            if any(c is None for c in counts):
                return "never", "never"
            return f"{statistics.median(counts):g}", f"{max(counts)}"

        print(f"{path.name:28} {len(rows):7} {sum(truth.values()):11} {said(now)[0]:>18} {said(now)[1]:>6} "
              f"{said(then)[0]:>19} {said(then)[1]:>6}")


if __name__ == "__main__":
    main()
