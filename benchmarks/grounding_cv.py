"""`grounding` on a labelled file under any reading (e.g. evidence=all vs evidence=select), with the
model card's cross-validated thresholds.

    python benchmarks/grounding_cv.py ../shared/data/ragtruth_qa_dev.jsonl -O evidence=select [-O k=2] \\
        [--save scores.jsonl] [--from-scores scores.jsonl]

Prints ROC AUC; precision, recall, F1 and balanced accuracy at the shipped threshold; where the
records carry ``meta.source_id`` (ragtruth_qa_dev), the same at thresholds fitted on the other
folds (5 folds by source, training/xe/examples.fold_of: each fold's threshold is F1-optimal on the
other four, as the model card's numbers are), and the F1-optimal threshold of the pooled scores
(how the card's threshold is calibrated); the mean encoder windows and records/s of the run.
grounding-2 was trained on ragtruth_qa_dev: its AUC there is in-sample for the weights (the full
reading sees exactly the inputs it was trained on); only the thresholds are cross-validated.
``--pad 20`` pads every record to 20 passages with other sources' passages (a retrieved pile with
distractors: what evidence selection is for). ``--reverse-contexts`` is a control for the in-sample
bias: the same passages in the opposite order change no
meaning, so what they cost the full reading is what any unseen input format costs in-sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from groundtrace.measure.classification import best_f1_threshold, confusion, roc_auc
from groundtrace.cli.common import json_or_text
from groundtrace.metrics import get_metric

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from xe.examples import fold_of  # noqa: E402


def classification(labels: np.ndarray, predicted: np.ndarray) -> dict:
    c = confusion(labels, predicted)
    return {"precision": c.precision, "recall": c.recall, "f1": c.f1, "balanced_accuracy": c.balanced_accuracy}


def padded(rows: list[dict], index: int, count: int) -> list[str]:
    """Record ``index``'s passages, then passages of the records after it (cyclically) that come
    from other sources, up to ``count``: a retrieved pile with distractors."""
    source = rows[index].get("meta", {}).get("source_id")
    passages = list(rows[index]["contexts"])
    for step in range(1, len(rows)):
        if len(passages) >= count:
            break
        other = rows[(index + step) % len(rows)]
        if other.get("meta", {}).get("source_id") != source:
            passages += [p for p in other["contexts"] if p not in passages]
    return passages[:count]


def score_file(path: Path, options: dict, limit: int | None, reverse: bool = False, pad: int = 0) -> list[dict]:
    every = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    rows = every[:limit]
    if reverse:  # a control: the same passages in the opposite order (no meaning changes)
        rows = [{**row, "contexts": row["contexts"][::-1]} for row in rows]
    if pad:
        rows = [{**row, "contexts": padded(every, i, pad)} for i, row in enumerate(rows)]
    metric = get_metric("grounding", **options)
    metric.score(rows[0])  # load the model outside the clock
    out = []
    started = time.perf_counter()
    for row in rows:
        score = metric.score(row)
        if not score.ok:
            raise RuntimeError(f"{row['id']}: {score.error}")
        out.append({"id": row["id"], "label": row["label"], "value": score.value,
                    "windows": score.details.get("windows", 0), "tokens": score.details.get("tokens", 0),
                    "source_id": row.get("meta", {}).get("source_id")})
    seconds = time.perf_counter() - started
    print(f"{len(rows)} records scored in {seconds:.0f} s ({len(rows) / seconds:.2f} records/s, "
          f"{np.mean([r['windows'] for r in out]):.2f} windows, {np.mean([r['tokens'] for r in out]):.0f} "
          "encoder positions per record)")
    return out


def report(scored: list[dict], threshold: float) -> dict:
    labels = np.array([r["label"] for r in scored], dtype=bool)
    values = np.array([r["value"] for r in scored])
    result: dict = {"records": len(scored), "hallucinated": int(labels.sum()), "auc": roc_auc(labels, values),
                    "at_shipped_threshold": {"threshold": threshold, **classification(labels, values >= threshold)},
                    "pooled_f1_optimal_threshold": best_f1_threshold(labels, values),
                    "windows_per_record": float(np.mean([r["windows"] for r in scored])),
                    "tokens_per_record": float(np.mean([r.get("tokens", 0) for r in scored]))}
    if all(r["source_id"] for r in scored):
        folds = np.array([fold_of(r["source_id"]) for r in scored])
        predicted = np.zeros(len(scored), dtype=bool)
        for f in np.unique(folds):
            t = best_f1_threshold(labels[folds != f], values[folds != f])
            predicted[folds == f] = values[folds == f] >= t
        result["cross_validated"] = classification(labels, predicted)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("-O", "--option", action="append", default=[], help="KEY=VALUE of the grounding metric")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--save", type=Path, default=None, help="write the per-record values here")
    parser.add_argument("--from-scores", type=Path, default=None, help="report on values saved earlier")
    parser.add_argument("--reverse-contexts", action="store_true",
                        help="a control: every record's passages in the opposite order")
    parser.add_argument("--pad", type=int, default=0,
                        help="pad every record to this many passages with other sources' passages")
    args = parser.parse_args()
    options = {k: json_or_text(v) for k, _, v in (o.partition("=") for o in args.option)}
    if args.from_scores:
        scored = [json.loads(line) for line in open(args.from_scores, encoding="utf-8")]
    else:
        scored = score_file(args.file, options, args.limit, args.reverse_contexts, args.pad)
    if args.save:
        args.save.write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    threshold = float(options.get("threshold", get_metric("grounding").threshold))
    result = report(scored, threshold)
    print(json.dumps({"file": args.file.name, "options": options, **result}, indent=1, default=float))


if __name__ == "__main__":
    main()
