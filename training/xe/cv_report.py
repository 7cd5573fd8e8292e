"""Cross-validated numbers on ragtruth_qa_dev from a run's out-of-fold token probabilities
(``run.py train`` -> ``WORK/runs/TAG/predictions.json.xz``, ``cv_oof``).

Every threshold applied to a fold is fitted on the other four folds' predictions (F1-optimal);
the pooled out-of-fold predictions give the shipped threshold. Prints response-level ROC AUC,
precision, recall, F1, balanced accuracy, and character-level span precision/recall/F1, for each
way of turning token probabilities into one answer score.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe.data import read_jsonl  # noqa: E402
from xe.examples import DATA  # noqa: E402

from groundtrace.detector.aggregate import answer_probability, claim_probabilities  # noqa: E402
from groundtrace.measure.classification import best_f1_threshold, confusion, reliability, roc_auc  # noqa: E402


def aggregate(p: np.ndarray, how: str) -> float:
    if len(p) == 0:
        return 0.0
    if how == "max":
        return float(p.max())
    k = int(how.split("-")[1])
    return float(np.sort(p)[-k:].mean())


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    return best_f1_threshold(labels, scores)


def classification(pred: np.ndarray, labels: np.ndarray) -> dict:
    c = confusion(labels, pred)
    return {k: round(v, 3) for k, v in {"precision": c.precision, "recall": c.recall, "f1": c.f1,
                                         "balanced_accuracy": c.balanced_accuracy}.items() if v is not None}


def cross_validated(scores: np.ndarray, labels: np.ndarray, folds: np.ndarray) -> tuple[dict, float]:
    pred = np.zeros(len(scores), dtype=bool)
    for f in np.unique(folds):
        t = best_threshold(scores[folds != f], labels[folds != f])
        pred[folds == f] = scores[folds == f] >= t
    result = {"auc": round(roc_auc(labels, scores), 3), **classification(pred, labels)}
    return result, best_threshold(scores, labels)


def span_chars(spans: list[tuple[int, int]], n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    for s, e in spans:
        mask[s:e] = True
    return mask


def token_spans(starts: np.ndarray, ends: np.ndarray, p: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    return [(int(s), int(e)) for s, e, q in zip(starts, ends, p, strict=False) if q >= threshold]


def write_reliability_svg(labels: np.ndarray, scores: np.ndarray, path: Path) -> None:
    """The report's reliability diagram (out-of-fold predictions), as a standalone SVG for the docs."""
    from types import SimpleNamespace

    from groundtrace.report.plots import reliability_plot
    from groundtrace.report.render import _environment

    plot = SimpleNamespace(name="grounding (out-of-fold)", higher_is_better=False,
                           labelled=SimpleNamespace(reliability=reliability_plot(labels.tolist(), scores.tolist())))
    svg = _environment().get_template("plots.html.j2").module.reliability(plot)
    style = ("<style>text{font:10px sans-serif;fill:#555}.axis{stroke:#888}.chance{stroke:#bbb;stroke-dasharray:3 3}"
             ".curve{fill:none;stroke:#1565c0;stroke-width:2}.dot{fill:#1565c0;opacity:.75}</style>")
    path.write_text(str(svg).replace("<title>", style + "<title>", 1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", type=Path, required=True, help="WORK/runs/TAG")
    parser.add_argument("--old-scores", type=Path, default=None, help="groundtrace score output with grounding/lexical")
    parser.add_argument("--svg", type=Path, default=ROOT / "docs" / "benchmarks" / "grounding-reliability.svg")
    args = parser.parse_args(argv)
    rows = {r["id"]: r for r in read_jsonl(DATA / "ragtruth_qa_dev.jsonl")}
    with lzma.open(args.run / "predictions.json.xz", "rt") as f:
        preds = json.load(f)["cv_oof"]
    labels = np.array([p["label"] for p in preds])
    folds = np.array([p["fold"] for p in preds])
    # as the metric reads them: the word tokens (a letter or digit) of the answer's claims
    probs = [np.asarray(p["p"])[np.asarray(p["scored"], dtype=bool)] for p in preds]
    report: dict = {"records": len(preds), "hallucinated": int(labels.sum())}
    # as grounding-3 reads them (groundtrace.detector.aggregate): claims, then a noisy-OR over claims
    claims_scores = np.array([answer_probability(claim_probabilities(np.asarray(p["p"]), np.asarray(p["claim_of"]),
                                                                     max(p["claim_of"], default=-1) + 1)) for p in preds])
    report["claims"], report["claims_threshold"] = cross_validated(claims_scores, labels, folds)
    for how in ("max", "top-2", "top-3", "top-5"):
        scores = np.array([aggregate(p, how) for p in probs])
        report[how], report[f"{how}_threshold"] = cross_validated(scores, labels, folds)
    # span level: characters of the flagged tokens against the gold spans, threshold from other folds
    max_scores = np.array([aggregate(p, "max") for p in probs])
    gold_total = pred_total = hit = 0
    for f in np.unique(folds):
        t = best_threshold(max_scores[folds != f], labels[folds != f])
        for i in np.where(folds == f)[0]:
            row, pred = rows[preds[i]["id"]], preds[i]
            scored = np.asarray(pred["scored"], dtype=bool)
            n = len(row["answer"])
            gold = span_chars([(s["start"], s["end"]) for s in row["spans"]], n)
            flagged = span_chars(token_spans(np.asarray(pred["starts"])[scored], np.asarray(pred["ends"])[scored],
                                             probs[i], t), n)
            gold_total += int(gold.sum())
            pred_total += int(flagged.sum())
            hit += int((gold & flagged).sum())
    sp, sr = hit / max(1, pred_total), hit / max(1, gold_total)
    report["span_chars"] = {"precision": round(sp, 3), "recall": round(sr, 3), "f1": round(2 * sp * sr / max(1e-9, sp + sr), 3)}
    if args.old_scores:
        from sklearn.linear_model import LogisticRegression

        old = {}
        for line in open(args.old_scores, encoding="utf-8"):
            r = json.loads(line)
            old[r["id"]] = {s["metric"]: s["value"] for s in r["scores"]}
        for name in ("grounding", "lexical"):
            v = np.array([old[p["id"]][name] for p in preds])
            report[f"old_{name}"] = cross_validated(v if name == "grounding" else -v, labels, folds)[0]
        clipped = np.clip(claims_scores, 1e-4, 1 - 1e-4)
        x = np.column_stack([np.log(clipped / (1 - clipped)), [old[p["id"]]["lexical"] for p in preds]])
        stacked = np.zeros(len(preds))
        for f in np.unique(folds):
            lr = LogisticRegression().fit(x[folds != f], labels[folds != f])
            stacked[folds == f] = lr.predict_proba(x[folds == f])[:, 1]
        report["stacked_with_lexical"] = cross_validated(stacked, labels, folds)[0]
    report["reliability"] = reliability(labels, claims_scores, 10)
    write_reliability_svg(labels, claims_scores, args.svg)
    print(json.dumps({k: v for k, v in report.items() if k != "reliability"}, indent=1))
    (args.run / "cv_report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
