"""What `groundtrace fit` buys on a domain the shipped verdict was not fitted on: fit on N labelled
records (the `fit` code path), measure F1 at the fitted threshold on the rest, against the shipped
defaults on the same rest (`grounding` at its card threshold, `combined` with its shipped file).

    python benchmarks/fit_domain.py LABELLED.jsonl [--scores SCORED.jsonl] [--n 100] [--draws 20]

``--scores``: a `groundtrace score -o` file of the same records with grounding, lexical and facts
(the metrics are run here otherwise). Each draw takes a stratified sample of N records for the fit;
the table gives the mean over draws and the 5th-95th percentile range.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from groundtrace.measure.bench import load_labelled
from groundtrace.measure.classification import confusion, roc_auc
from groundtrace.combine.fitting import Target, features, fit, predict
from groundtrace.combine.labels import fit_inputs, metric_scores
from groundtrace.io import read_scored
from groundtrace.score import scores_by_id
from groundtrace.backends.verdict import VerdictModel
from groundtrace.metrics.combined import DEFAULT_FILE
from groundtrace.metrics.grounding import model_card

NAMES = ["grounding", "lexical", "facts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("labelled", type=Path)
    parser.add_argument("--scores", type=Path)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    items = load_labelled(args.labelled)
    scored = scores_by_id(read_scored(args.scores)) if args.scores else None
    inputs = fit_inputs(items, metric_scores(items, NAMES, {}, scored))
    h, y, lang = inputs.values, inputs.labels, np.array(inputs.languages)
    shipped = VerdictModel.load(DEFAULT_FILE)
    p_shipped = predict(shipped.model, features(h), lang)
    g_threshold = float(model_card()["threshold"])
    rng = np.random.default_rng(args.seed)
    rows: dict[str, list[float]] = {k: [] for k in ("grounding", "combined (shipped)", "fitted")}
    aucs: dict[str, list[float]] = {k: [] for k in rows}
    positives, negatives = np.nonzero(y == 1)[0], np.nonzero(y == 0)[0]
    k = round(args.n * len(positives) / len(y))
    for draw in range(args.draws):
        train = np.r_[rng.choice(positives, k, replace=False), rng.choice(negatives, args.n - k, replace=False)]
        rest = np.setdiff1d(np.arange(len(y)), train)
        result = fit(h[train], y[train], lang[train], [str(i) for i in train], NAMES, Target("f1"), draws=50,
                     learning_repeats=1, seed=draw)
        p_fit = predict(result.verdict.model, features(h[rest]), lang[rest])
        for name, p, cut in (("grounding", h[rest, 0], g_threshold), ("combined (shipped)", p_shipped[rest], shipped.threshold),
                             ("fitted", p_fit, result.verdict.threshold)):
            rows[name].append(confusion(y[rest], p >= cut).f1)
            aucs[name].append(roc_auc(y[rest], p) or float("nan"))
    print(f"{args.labelled.name}: fit on {args.n} labelled records, measured on the other {len(y) - args.n}, {args.draws} draws")
    print(f"{'scorer':22s} {'F1 mean':>8s} {'F1 5-95%':>14s} {'AUC mean':>9s}")
    for name, f1s in rows.items():
        print(f"{name:22s} {np.mean(f1s):8.3f} {np.percentile(f1s, 5):6.3f}-{np.percentile(f1s, 95):.3f} {np.nanmean(aucs[name]):9.3f}")
    gain = np.array(rows["fitted"]) - np.array(rows["grounding"])
    gain_combined = np.array(rows["fitted"]) - np.array(rows["combined (shipped)"])
    print(json.dumps({"fitted_minus_grounding_f1": [round(float(np.mean(gain)), 3), round(float(np.percentile(gain, 5)), 3),
                                                    round(float(np.percentile(gain, 95)), 3)],
                      "fitted_minus_combined_f1": [round(float(np.mean(gain_combined)), 3),
                                                   round(float(np.percentile(gain_combined, 5)), 3),
                                                   round(float(np.percentile(gain_combined, 95)), 3)]}))


if __name__ == "__main__":
    main()
