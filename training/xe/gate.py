"""The ship gate of grounding-4 (issue 23), for candidates against grounding-2, from their predictions
(``run.py train`` -> WORK/runs/TAG/predictions.json.xz; grounding-2 through the same code path:
``run.py predict`` -> WORK_G2/runs/grounding-2/). A candidate replaces grounding-2 when

    ragtruth   its 5-fold CV ROC AUC on ragtruth_qa_dev (folds by meta.source_id) is at least
               ``--margin`` (0.02) above grounding-2's (the model card's 0.784)
    held-out   its ROC AUC on each held-out set of summaries, dialogues and long answers
               (public_summedits, public_qags, public_begin, public_faithdial, public_lfqa) is above
               grounding-2's
    paraphrase its paraphrase dev pairwise (en; ru = paraphrase_ru + paraphrase_ru_b; zh) is not below
               grounding-2's by more than the 90% bootstrap interval of that difference: the upper end
               of the interval of (candidate - grounding-2) is >= 0
    verdicts   at each model's own threshold (the candidate's from its ragtruth predictions, grounding-2's
               card threshold ``--g2-threshold``), the share of the paraphrase dev set's faithful answers
               it flags is not above grounding-2's by more than the 90% bootstrap interval (the lower
               end of the interval of (candidate - grounding-2) is <= 0), in each language; the share
               of planted errors caught is reported beside it. Ranking alone let a candidate through
               that flagged 58% of the Russian faithful answers here (grounding-2: 23%; model card)
    speed      (same architecture and reading: stated, not computed here)

Intervals: 90% percentile bootstrap, 1,000 draws, resampling sources (RAGTruth meta.source_id, public
sets meta.source_group) or paraphrase pairs, paired where two models are compared. Each model is read
as it ships: grounding-2 by its maximum word token ("max"), a candidate by the claims aggregation
("score": groundtrace.detector.aggregate) unless ``--candidate-score max``.

    python training/xe/gate.py --g2 WORK_G2/runs/grounding-2 --run WORK/runs/A [--run WORK/runs/B ...]
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe.cv_report import cross_validated  # noqa: E402

from groundtrace.measure.classification import roc_auc  # noqa: E402

G2_CV_AUC = 0.784  # docs/benchmarks/grounding-model-card.md: grounding-2's out-of-fold AUC (max), the only CV it has
G2_THRESHOLD = 0.5149  # grounding-2's card threshold (its maximum word token)
HELD_OUT = ("public_summedits", "public_qags", "public_begin", "public_faithdial", "public_lfqa")
REPORTED = ("public_wice", "halluqa_zh")
LANGUAGES = {"en": ("paraphrase_en",), "ru": ("paraphrase_ru", "paraphrase_ru_b"), "zh": ("paraphrase_zh",)}
TARGETS = {"cv_auc": 0.86, "cv_f1": 0.60, "held_out": 0.75, "pairwise": 0.85, "halluqa_zh": 0.70}
DRAWS = 1000


def predictions(run: Path) -> dict:
    with lzma.open(run / "predictions.json.xz", "rt") as f:
        return json.load(f)


def interval(values: list[float]) -> list[float]:
    return [round(float(np.percentile(values, 5)), 3), round(float(np.percentile(values, 95)), 3)]


def bootstrap(groups: list[str], statistic: Callable[[np.ndarray], float | None], seed: int = 0) -> list[float]:
    """``statistic`` of the record indices of ``DRAWS`` resamples of the groups (with replacement)."""
    rng = np.random.default_rng(seed)
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    keys = sorted(members)
    out = []
    for _ in range(DRAWS):
        drawn = rng.integers(0, len(keys), len(keys))
        index = np.concatenate([members[keys[k]] for k in drawn])
        value = statistic(index)
        if value is not None:
            out.append(value)
    return out


def _auc(rows: list[dict], key: str, index: np.ndarray | None = None) -> float | None:
    labels = np.array([r["label"] for r in rows])
    scores = np.array([r[key] for r in rows])
    if index is not None:
        labels, scores = labels[index], scores[index]
    return roc_auc(labels, scores)


def _group(row: dict) -> str:
    return str(row.get("group") or row["id"])


def paired_auc(cand: list[dict], old: list[dict], cand_key: str, old_key: str) -> dict:
    """Both AUCs on the records both scored, and the bootstrap interval of their difference."""
    old_by = {r["id"]: r for r in old}
    cand = [r for r in cand if r["id"] in old_by]
    old = [old_by[r["id"]] for r in cand]
    a, b = _auc(cand, cand_key), _auc(old, old_key)
    diffs = bootstrap([_group(r) for r in cand], lambda i: _diff(_auc(cand, cand_key, i), _auc(old, old_key, i)))
    return {"n": len(cand), "hallucinated": int(sum(r["label"] for r in cand)), "candidate": _round(a),
            "grounding_2": _round(b), "difference": _round(_diff(a, b)), "difference_90": interval(diffs),
            "candidate_90": interval(bootstrap([_group(r) for r in cand], lambda i: _auc(cand, cand_key, i)))}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def pairwise(rows: list[dict], key: str) -> dict[str, tuple[float, float]]:
    """Per paraphrase pair (id without its last part): (hallucinated twin's score, faithful one's)."""
    by: dict[str, dict[int, float]] = {}
    for r in rows:
        by.setdefault(r["id"].rsplit(":", 1)[0], {})[r["label"]] = r[key]
    return {k: (v[1], v[0]) for k, v in by.items() if 0 in v and 1 in v}


def paired_pairwise(cand: dict, old: dict, files: tuple[str, ...], cand_key: str, old_key: str) -> dict:
    a = {f"{f}/{k}": v for f in files for k, v in pairwise(cand[f], cand_key).items()}
    b = {f"{f}/{k}": v for f in files for k, v in pairwise(old[f], old_key).items()}
    keys = sorted(set(a) & set(b))
    wins_a = np.array([a[k][0] > a[k][1] for k in keys], dtype=float)
    wins_b = np.array([b[k][0] > b[k][1] for k in keys], dtype=float)
    diffs = bootstrap(keys, lambda i: float(wins_a[i].mean() - wins_b[i].mean()))
    return {"pairs": len(keys), "candidate": round(float(wins_a.mean()), 3), "grounding_2": round(float(wins_b.mean()), 3),
            "difference": round(float(wins_a.mean() - wins_b.mean()), 3), "difference_90": interval(diffs)}


def paired_verdicts(cand: dict, old: dict, files: tuple[str, ...], cand_key: str, old_key: str,
                    cand_threshold: float, old_threshold: float) -> dict:
    """Faithful answers flagged and planted errors caught, each model at its own threshold."""
    def rows(preds: dict, key: str, threshold: float) -> dict[str, tuple[int, bool]]:
        return {f"{f}/{r['id']}": (r["label"], r[key] >= threshold) for f in files for r in preds[f]}

    a, b = rows(cand, cand_key, cand_threshold), rows(old, old_key, old_threshold)
    out: dict = {"thresholds": [round(cand_threshold, 4), round(old_threshold, 4)]}
    for label, name in ((0, "faithful_flagged"), (1, "planted_caught")):
        keys = sorted(k for k in set(a) & set(b) if a[k][0] == label)
        fa = np.array([a[k][1] for k in keys], dtype=float)
        fb = np.array([b[k][1] for k in keys], dtype=float)
        diffs = bootstrap(keys, lambda i, fa=fa, fb=fb: float(fa[i].mean() - fb[i].mean()))
        out[name] = {"n": len(keys), "candidate": round(float(fa.mean()), 3), "grounding_2": round(float(fb.mean()), 3),
                     "difference": round(float(fa.mean() - fb.mean()), 3), "difference_90": interval(diffs)}
    return out


def cv(run_predictions: dict, key: str) -> dict:
    oof = run_predictions["cv_oof"]
    labels = np.array([r["label"] for r in oof])
    scores = np.array([r[key] for r in oof])
    folds = np.array([r["fold"] for r in oof])
    result, threshold = cross_validated(scores, labels, folds)
    groups = [_group(r) for r in oof]
    return {**result, "auc_90": interval(bootstrap(groups, lambda i: _auc(oof, key, i))), "threshold": round(threshold, 4)}


def gate(cand: dict, old: dict, cand_key: str, margin: float, g2_threshold: float = G2_THRESHOLD) -> dict:
    out: dict = {"cv": cv(cand, cand_key)}
    out["held_out"] = {name: paired_auc(cand["final"][name], old["final"][name], cand_key, "max")
                       for name in (*HELD_OUT, *REPORTED) if name in cand["final"] and name in old["final"]}
    out["paraphrase"] = {lang: paired_pairwise(cand["final"], old["final"], files, cand_key, "max")
                         for lang, files in LANGUAGES.items()}
    out["verdicts"] = {lang: paired_verdicts(cand["final"], old["final"], files, cand_key, "max", out["cv"]["threshold"],
                                             g2_threshold) for lang, files in LANGUAGES.items()}
    checks = {"ragtruth_cv": out["cv"]["auc"] >= G2_CV_AUC + margin}
    for name in HELD_OUT:
        h = out["held_out"].get(name)
        checks[f"held_out:{name}"] = bool(h and h["difference"] is not None and h["difference"] > 0)
    for lang, p in out["paraphrase"].items():
        checks[f"paraphrase:{lang}"] = p["difference_90"][1] >= 0
    for lang, v in out["verdicts"].items():
        checks[f"faithful_flagged:{lang}"] = v["faithful_flagged"]["difference_90"][0] <= 0
    out["checks"] = checks
    out["passes"] = all(checks.values())
    out["targets"] = {
        "cv_auc>=0.86": out["cv"]["auc"] >= TARGETS["cv_auc"], "cv_f1>=0.60": out["cv"]["f1"] >= TARGETS["cv_f1"],
        **{f"{n}>=0.75": (out["held_out"].get(n, {}).get("candidate") or 0) >= TARGETS["held_out"] for n in HELD_OUT},
        **{f"pairwise_{lang}>=0.85": p["candidate"] >= TARGETS["pairwise"] for lang, p in out["paraphrase"].items()},
        "halluqa_zh>=0.70": (out["held_out"].get("halluqa_zh", {}).get("candidate") or 0) >= TARGETS["halluqa_zh"],
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--g2", type=Path, required=True, help="grounding-2's predictions (run.py predict)")
    parser.add_argument("--run", type=Path, action="append", required=True, help="a candidate's run folder")
    parser.add_argument("--candidate-score", default="score", choices=["score", "max"])
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument("--g2-threshold", type=float, default=G2_THRESHOLD)
    args = parser.parse_args(argv)
    old = predictions(args.g2)
    report = {run.name: gate(predictions(run), old, args.candidate_score, args.margin, args.g2_threshold)
              for run in args.run}
    print(json.dumps(report, indent=1))
    for run in args.run:
        (run / "gate.json").write_text(json.dumps(report[run.name], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
