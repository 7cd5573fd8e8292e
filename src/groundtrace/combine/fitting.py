"""Fitting a verdict on labelled records: scikit-learn's logistic regression over the components'
log-odds (Platt-style: its output is the calibrated probability), cross-validated by group, with a
threshold for a stated target, bootstrap intervals and a learning curve.

Every figure is out of fold: the probabilities come from models fitted without the record's group
(StratifiedGroupKFold), and each fold's threshold is chosen on the other folds' probabilities, so a
figure at "the threshold" is what a threshold chosen on other data would give.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from groundtrace._extras import missing_extra
from groundtrace.measure.classification import best_f1_threshold, confusion, roc_auc
from groundtrace.backends.verdict import Cascade, Component, LinearModel, VerdictModel

MIN_RECORDS = 30  # below this, or below MIN_PER_CLASS of a class, the fit is refused
MIN_PER_CLASS = 8
ADVISED_RECORDS = 100  # below this (or 25 of a class), the figures come with a warning
MIN_LANGUAGE = 20  # records (of both classes) a language needs for an offset of its own
LEARNING_SIZES = (25, 50, 100)
INTERVAL = 0.90


#: the default target: the threshold that maximises balanced accuracy (the mean of the recall of each
#: class) does not move with the share of unsupported answers, and flagging everything scores 0.5 on it;
#: F1 of the unsupported class rewards flagging everything on a set where most answers are unsupported,
#: and labels from a review queue are such a set (it shows the flagged answers first)
DEFAULT_TARGET = "balanced_accuracy"
#: a chosen threshold that flags more or less than this share of the labelled answers is warned about
FLAGS_TOO_MANY, FLAGS_TOO_FEW = 0.90, 0.02
TARGETS_HELP = "balanced_accuracy, mcc, f1, cost=5:1 (a missed unsupported answer costs 5 false flags), precision>=0.8, recall>=0.9 or rate=0.1"
_NAMES = {"f1": "f1", "best-f1": "f1", "bestf1": "f1", "balanced_accuracy": "balanced_accuracy",
          "balanced-accuracy": "balanced_accuracy", "balancedaccuracy": "balanced_accuracy", "bacc": "balanced_accuracy",
          "mcc": "mcc"}


@dataclass(frozen=True)
class Target:
    """What the threshold is chosen for: best F1, best balanced accuracy, best MCC, the least cost of
    errors (``value``: what a missed unsupported answer costs, a false flag costing 1), precision >= P,
    recall >= R, or a flagged rate."""

    kind: str  # f1 | balanced_accuracy | mcc | cost | precision | recall | rate
    value: float | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        spec = text.strip().lower().replace(" ", "")
        if spec in _NAMES:
            return cls(_NAMES[spec])
        cost = re.fullmatch(r"cost=([0-9.]+):([0-9.]+)", spec)
        if cost is not None:
            try:
                missed, false_flag = float(cost.group(1)), float(cost.group(2))
            except ValueError:
                missed = false_flag = 0.0
            if not (missed > 0 and false_flag > 0):
                raise ValueError(f"target {text!r}: cost=FN:FP takes two positive numbers, e.g. cost=5:1")
            return cls("cost", missed / false_flag)
        match = re.fullmatch(r"(precision|recall|rate)(>=|<=|=)([0-9.]+%?)", spec)
        if match is None:
            raise ValueError(f"target {text!r}: use {TARGETS_HELP}")
        kind, _, raw = match.groups()
        try:
            value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ValueError(f"target {text!r}: {raw} is not a number") from None
        if not 0.0 < value <= 1.0:
            raise ValueError(f"target {text!r}: {raw} is not a share in (0, 1]")
        return cls(kind, value)

    def __str__(self) -> str:
        if self.kind in ("f1", "balanced_accuracy", "mcc"):
            return self.kind
        if self.kind == "cost":
            return f"cost={self.value:g}:1"
        return f"{self.kind}{'=' if self.kind == 'rate' else '>='}{self.value:g}"

    def threshold(self, p: np.ndarray, y: np.ndarray) -> float:
        """The threshold on ``p`` (flagged when p >= it) that meets this target on labels ``y``."""
        if self.kind == "f1":
            return best_f1_threshold(y, p)
        order = np.argsort(-p, kind="mergesort")
        ranked, hits = p[order], np.cumsum(y[order] == 1)
        last = np.r_[ranked[1:] != ranked[:-1], True]  # the last record of each distinct value
        cuts, flagged, tp = ranked[last], np.nonzero(last)[0] + 1, hits[last]  # strictest cut first
        if self.kind in ("balanced_accuracy", "mcc", "cost"):
            # ties go to the strictest cut: the fewest flags for the same figure
            return float(cuts[int(np.argmax(_by_cut(self, tp, flagged, int(y.sum()), len(y))))])
        assert self.value is not None
        if self.kind == "rate":
            ok = flagged <= self.value * len(p)
            return float(cuts[np.nonzero(ok)[0][-1]]) if ok.any() else float(cuts[0])
        if self.kind == "precision":
            ok = tp / flagged >= self.value
            return float(cuts[np.nonzero(ok)[0][-1]]) if ok.any() else float(cuts[0])  # the most recall that keeps it
        ok = tp / max(int(y.sum()), 1) >= self.value
        return float(cuts[np.nonzero(ok)[0][0]]) if ok.any() else float(cuts[-1])  # the strictest that reaches it


def _by_cut(target: Target, tp: np.ndarray, flagged: np.ndarray, positives: int, n: int) -> np.ndarray:
    """What ``target`` makes of each cut (higher is better; a cost is negated)."""
    tp = tp.astype(float)
    fp, fn = flagged - tp, positives - tp
    tn = (n - positives) - fp
    if target.kind == "balanced_accuracy":
        return (tp / max(positives, 1) + tn / max(n - positives, 1)) / 2
    if target.kind == "mcc":
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        return np.divide(tp * tn - fp * fn, denominator, out=np.zeros_like(tp), where=denominator > 0)
    assert target.value is not None
    return -(target.value * fn + fp)


def flag_share_warning(share: float, n: int, positives: int, target: Target) -> str | None:
    """A warning when the chosen threshold flags nearly every labelled answer, or nearly none: a
    verdict that says the same thing of every answer, whatever its figures look like."""
    if FLAGS_TOO_FEW <= share <= FLAGS_TOO_MANY:
        return None
    what = "nearly every answer" if share > FLAGS_TOO_MANY else "nearly no answer"
    advice = ("try --target balanced_accuracy or mcc" if target.kind not in ("balanced_accuracy", "mcc")
              else "the metrics may not tell these labels apart: check each with groundtrace bench")
    return (f"the threshold chosen for {target} flags {share:.0%} of the {n} labelled answers ({positives} "
            f"labelled unsupported, {positives / max(n, 1):.0%}): it flags {what}; {advice}")


# ---------------------------------------------------------------------------------- features
def features(h: np.ndarray) -> np.ndarray:
    """Log-odds of hallucination-oriented values (n x k; NaN stays NaN: a failed score)."""
    p = np.clip(h, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


@dataclass
class _Design:
    mean: np.ndarray
    scale: np.ndarray
    languages: list[str]

    @classmethod
    def of(cls, x: np.ndarray, language: np.ndarray, y: np.ndarray) -> _Design:
        mean = np.nanmean(x, axis=0)
        scale = np.nanstd(x, axis=0)
        scale[~(scale > 1e-9)] = 1.0
        kept = [lang for lang in sorted(set(language)) if lang and (language == lang).sum() >= MIN_LANGUAGE
                and 0 < y[language == lang].sum() < (language == lang).sum()]
        return cls(np.nan_to_num(mean), scale, kept if len(kept) > 1 else [])

    def matrix(self, x: np.ndarray, language: np.ndarray) -> np.ndarray:
        z = (np.where(np.isnan(x), self.mean, x) - self.mean) / self.scale
        onehot = np.array([[1.0 if lang == kept else 0.0 for kept in self.languages] for lang in language]).reshape(len(x), -1)
        return np.hstack([z, onehot])


def _sklearn(module: str) -> Any:
    """A scikit-learn module (the fit extra): fitting needs it, scoring with a fitted file does not."""
    import importlib

    try:
        return importlib.import_module(f"sklearn.{module}")
    except ImportError as error:
        raise missing_extra("fit", "groundtrace fit", error) from None


def _fit_linear(x: np.ndarray, y: np.ndarray, language: np.ndarray, names: Sequence[str], c: float = 1.0) -> LinearModel:
    LogisticRegression = _sklearn("linear_model").LogisticRegression  # noqa: N806 (a class)

    design = _Design.of(x, language, y)
    model = LogisticRegression(C=c, max_iter=1000).fit(design.matrix(x, language), y)
    k = len(names)
    weights = model.coef_[0]
    return LinearModel(features=list(names), mean=[float(v) for v in design.mean], scale=[float(v) for v in design.scale],
                       coef=[float(v) for v in weights[:k]], intercept=float(model.intercept_[0]),
                       language_offsets={lang: float(w) for lang, w in zip(design.languages, weights[k:], strict=True)})


def predict(model: LinearModel, x: np.ndarray, language: np.ndarray) -> np.ndarray:
    """The model's probabilities for feature rows ``x`` (log-odds; NaN = the component failed)."""
    mean, scale, coef = np.array(model.mean), np.array(model.scale), np.array(model.coef)
    z = ((np.where(np.isnan(x), mean, x) - mean) / scale) @ coef + model.intercept
    z = z + np.array([model.language_offsets.get(str(lang), 0.0) for lang in language])
    return 1.0 / (1.0 + np.exp(-z))


# ---------------------------------------------------------------------------------- figures
def calibration_error(y: np.ndarray, p: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: the share-weighted gap between the mean probability and the
    observed rate, over equal-width bins."""
    index = np.minimum((np.clip(p, 0, 1) * bins).astype(int), bins - 1)
    total = 0.0
    for b in np.unique(index):
        mask = index == b
        total += mask.mean() * abs(p[mask].mean() - y[mask].mean())
    return float(total)


def _figures(y: np.ndarray, p: np.ndarray, flagged: np.ndarray) -> dict[str, float | None]:
    c = confusion(y, flagged)
    return {"auc": roc_auc(y, p), "f1": c.f1, "precision": c.precision, "recall": c.recall,
            "balanced_accuracy": c.balanced_accuracy, "mcc": mcc(c.tp, c.fp, c.fn, c.tn),
            "calibration_error": calibration_error(y, p), "flagged_rate": float(flagged.mean())}


def mcc(tp: int, fp: int, fn: int, tn: int) -> float:
    """Matthews correlation of flags and labels: 0 for a verdict that says the same of every answer."""
    denominator = math.sqrt(float(tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def weaker_than_alone(combined: Measured, alone: Sequence[Measured], target: Target) -> str | None:
    """Said when one metric alone beats the combination out of fold, by the target's own figure (AUC for a cost,
    precision, recall or rate target): the verdict would be a step back from that metric."""
    key = target.kind if target.kind in ("f1", "balanced_accuracy", "mcc") else "auc"
    mine = combined.point.get(key)
    rivals = [(m.point.get(key), m.name) for m in alone if m.point.get(key) is not None]
    if mine is None or not rivals:
        return None
    best, name = max(rivals, key=lambda rival: float(rival[0] or 0.0))
    if best is None or round(float(best), 3) <= round(float(mine), 3):
        return None
    label = {"f1": "F1", "balanced_accuracy": "balanced accuracy", "mcc": "MCC", "auc": "ROC AUC"}[key]
    return (f"the combination's out-of-fold {label} ({float(mine):.3f}) is below {name} alone ({float(best):.3f}) on "
            f"these labels: score with {name} alone (-m {name}; `groundtrace bench` picks its threshold), or label "
            "more answers and fit again")


@dataclass
class Measured:
    """Figures of one scorer (the combination, or one metric alone) with bootstrap intervals."""

    name: str
    point: dict[str, float | None]
    interval: dict[str, tuple[float, float] | None]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, **{k: _round(v) for k, v in self.point.items()},
                "intervals": {k: None if v is None else [_round(v[0]), _round(v[1])] for k, v in self.interval.items()}}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def group_resamples(groups: np.ndarray, draws: int, seed: int) -> Iterator[np.ndarray]:
    """The record indices of each draw of a group bootstrap: the groups resampled with replacement,
    each bringing all its records (a source's answers, a paraphrase's twins stay together)."""
    rng = np.random.default_rng(seed)
    unique, inverse = np.unique(groups, return_inverse=True)
    members = [np.nonzero(inverse == g)[0] for g in range(len(unique))]
    for _ in range(draws):
        yield np.concatenate([members[g] for g in rng.integers(0, len(unique), len(unique))])


def measured(name: str, y: np.ndarray, p: np.ndarray, flagged: np.ndarray, groups: np.ndarray,
             draws: int, seed: int) -> Measured:
    point = _figures(y, p, flagged)
    samples: dict[str, list[float]] = {k: [] for k in point}
    for index in group_resamples(groups, draws, seed):
        for key, value in _figures(y[index], p[index], flagged[index]).items():
            if value is not None:
                samples[key].append(value)
    low, high = (1 - INTERVAL) / 2 * 100, (1 + INTERVAL) / 2 * 100
    interval: dict[str, tuple[float, float] | None] = {}
    for key, values in samples.items():
        at = point[key]
        if len(values) < draws // 2 or at is None:
            interval[key] = None
            continue
        # a resample repeats records, which only ever inflates the calibration error: its interval is
        # shifted back by that bias (the others are percentile intervals as they are)
        shift = float(np.mean(values)) - at if key == "calibration_error" else 0.0
        lower = float(np.percentile(values, low)) - shift
        # only the shifted calibration error could fall below zero where it cannot be; MCC may be negative
        interval[key] = (max(0.0, lower) if key == "calibration_error" else lower, float(np.percentile(values, high)) - shift)
    return Measured(name, point, interval)


# ---------------------------------------------------------------------------------- the fit
@dataclass
class FitResult:
    verdict: VerdictModel
    combined: Measured
    alone: list[Measured]
    learning_curve: list[dict[str, Any]]
    stable_at: int | None
    warnings: list[str] = field(default_factory=list)
    cascade_curve: list[dict[str, Any]] = field(default_factory=list)
    oof: np.ndarray | None = None
    flagged_share: float | None = None  # of the labelled answers, at the chosen threshold (out of fold)

    def report(self) -> dict[str, Any]:
        return {"combined": self.combined.as_dict(), "alone": [m.as_dict() for m in self.alone],
                "learning_curve": self.learning_curve, "stable_at": self.stable_at, "warnings": self.warnings,
                "flagged_share": _round(self.flagged_share), "cascade": self.cascade_curve or None}


def _folds(y: np.ndarray, groups: np.ndarray, seed: int, folds: int) -> np.ndarray:
    StratifiedGroupKFold = _sklearn("model_selection").StratifiedGroupKFold  # noqa: N806 (a class)
    n_splits = max(2, min(folds, int(y.sum()), int((1 - y).sum()), len(np.unique(groups))))
    fold = np.zeros(len(y), dtype=int)
    splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for k, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y, groups)):
        fold[test] = k
    return fold


def out_of_fold(x: np.ndarray, y: np.ndarray, language: np.ndarray, fold: np.ndarray, names: Sequence[str]) -> np.ndarray:
    p = np.zeros(len(y))
    for k in np.unique(fold):
        train = fold != k
        p[~train] = predict(_fit_linear(x[train], y[train], language[train], names), x[~train], language[~train])
    return p


def nested_flags(p: np.ndarray, y: np.ndarray, fold: np.ndarray, target: Target) -> np.ndarray:
    """Each fold flagged at a threshold chosen for ``target`` on the other folds."""
    flagged = np.zeros(len(y), dtype=bool)
    for k in np.unique(fold):
        other = fold != k
        flagged[~other] = p[~other] >= target.threshold(p[other], y[other])
    return flagged


def check_labels(y: np.ndarray) -> list[str]:
    """Refuse a fit that cannot be made; warn about one that will not be stable."""
    n, positives = len(y), int(y.sum())
    if n < MIN_RECORDS or min(positives, n - positives) < MIN_PER_CLASS:
        raise ValueError(f"too few labels to fit: {n} records, {positives} labelled 1 and {n - positives} labelled 0 "
                         f"(at least {MIN_RECORDS} records with {MIN_PER_CLASS} of each label; 100 or more advised)")
    if n < ADVISED_RECORDS or min(positives, n - positives) < 25:
        return [f"only {n} labelled records ({positives} labelled 1): the figures' intervals are wide and the fit may not "
                f"be stable; label {ADVISED_RECORDS} or more, with at least 25 of each label"]
    return []


def fit(h: np.ndarray, y: np.ndarray, language: Sequence[str | None], groups: Sequence[str], names: Sequence[str],
        target: Target, *, options: Sequence[dict[str, Any]] | None = None, costly: tuple[str, np.ndarray] | None = None,
        share: float = 0.2, costly_options: dict[str, Any] | None = None, draws: int = 1000, seed: int = 0,
        folds: int = 5, learning_repeats: int = 20) -> FitResult:
    """Fit the verdict on hallucination-oriented values ``h`` (n x k, NaN = the component failed) of
    the metrics ``names``, labels ``y`` (1 = unsupported). ``costly``: a costly metric's name and
    values, for a cascade sending ``share`` of the records to it."""
    y = np.asarray(y, dtype=int)
    warnings = check_labels(y)
    lang = np.array([str(v or "") for v in language])
    group = np.array([str(g) for g in groups])
    x = features(np.asarray(h, dtype=float))
    for j, name in enumerate(names):
        failed = int(np.isnan(x[:, j]).sum())
        if failed == len(y):
            raise ValueError(f"metric {name} scored none of the {len(y)} records: it cannot be a component")
        if failed:
            warnings.append(f"{name} failed on {failed} of {len(y)} records: its mean stands in for them")
    fold = _folds(y, group, seed, folds)
    oof = out_of_fold(x, y, lang, fold, names)
    combined = measured("combined", y, oof, nested_flags(oof, y, fold, target), group, draws, seed)
    alone = []
    for j, name in enumerate(names):
        raw = np.where(np.isnan(h[:, j]), np.nanmean(h[:, j]), h[:, j])
        alone.append(measured(name, y, raw, nested_flags(raw, y, fold, target), group, draws, seed))
    final = _fit_linear(x, y, lang, names)
    threshold = target.threshold(oof, y)
    flagged_share = float((oof >= threshold).mean())
    skewed = flag_share_warning(flagged_share, len(y), int(y.sum()), target)
    if skewed:
        warnings.append(skewed)
    if (weaker := weaker_than_alone(combined, alone, target)) is not None:
        warnings.append(weaker)
    curve, stable = learning_curve(x, y, lang, names, combined.point["auc"], learning_repeats, seed)
    cascade: Cascade | None = None
    cascade_curve: list[dict[str, Any]] = []
    if costly is not None:
        cascade, cascade_curve = fit_cascade(x, y, lang, fold, names, oof, threshold, costly, share, costly_options or {})
    verdict = VerdictModel(
        components=[Component(name, _stated(name, o)) for name, o in zip(names, options or [{} for _ in names],
                                                                          strict=True)],
        model=final, threshold=float(threshold), target=str(target), cascade=cascade,
        fitted={"records": int(len(y)), "labelled_1": int(y.sum()),
                "languages": {lang_: int((lang == lang_).sum()) for lang_ in sorted(set(lang)) if lang_}},
    )
    return FitResult(verdict, combined, alone, curve, stable, warnings, cascade_curve, oof, flagged_share)


def learning_curve(x: np.ndarray, y: np.ndarray, lang: np.ndarray, names: Sequence[str], full_auc: float | None,
                   repeats: int, seed: int) -> tuple[list[dict[str, Any]], int | None]:
    """ROC AUC on the records left out when fitting on 25, 50, 100 labelled records (``repeats``
    stratified draws each), beside the cross-validated AUC of all; ``stable_at``: the fewest labels
    whose mean AUC is within 0.02 of all's and whose worst 5% within 0.05."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    stable = None
    positives = np.nonzero(y == 1)[0]
    negatives = np.nonzero(y == 0)[0]
    for size in LEARNING_SIZES:
        if size >= len(y) - 10:
            break
        k = max(2, round(size * len(positives) / len(y)))
        aucs = []
        for _ in range(repeats):
            train = np.r_[rng.choice(positives, k, replace=False), rng.choice(negatives, size - k, replace=False)]
            rest = np.setdiff1d(np.arange(len(y)), train)
            p = predict(_fit_linear(x[train], y[train], lang[train], names), x[rest], lang[rest])
            auc = roc_auc(y[rest], p)
            if auc is not None:
                aucs.append(auc)
        mean, low = float(np.mean(aucs)), float(np.percentile(aucs, 5))
        rows.append({"labels": size, "auc_mean": round(mean, 4), "auc_p5": round(low, 4), "draws": len(aucs)})
        if stable is None and full_auc is not None and mean >= full_auc - 0.02 and low >= full_auc - 0.05:
            stable = size
    rows.append({"labels": len(y), "auc_mean": _round(full_auc), "auc_p5": None, "draws": 1, "cross_validated": True})
    return rows, stable if stable is not None else (len(y) if rows else None)


def fit_cascade(x: np.ndarray, y: np.ndarray, lang: np.ndarray, fold: np.ndarray, names: Sequence[str], oof: np.ndarray,
                threshold: float, costly: tuple[str, np.ndarray], share: float,
                options: dict[str, Any]) -> tuple[Cascade, list[dict[str, Any]]]:
    """The band around the threshold that holds ``share`` of the records (nearest in log-odds), and
    the model that decides them with the costly metric's value beside the cheap ones; with the
    expected figures at several shares (out of fold)."""
    name, values = costly
    x2 = np.hstack([x, features(np.asarray(values, dtype=float)).reshape(-1, 1)])
    names2 = [*names, name]
    oof2 = out_of_fold(x2, y, lang, fold, names2)
    distance = np.abs(_logit(oof) - _logit(np.array([threshold]))[0])
    curve = []
    for s in sorted({0.0, 0.1, 0.2, 0.3, 0.5, 1.0, share}):
        band = _band(distance, threshold, s)
        inside = (oof >= band[0]) & (oof < band[1])
        decided = np.where(inside, oof2 >= threshold, oof >= threshold)
        c = confusion(y, decided)
        curve.append({"share": round(s, 3), "escalated": int(inside.sum()), "f1": round(c.f1, 4),
                      "precision": round(c.precision, 4), "recall": round(c.recall, 4)})
    low, high = _band(distance, threshold, share)
    inside = (oof >= low) & (oof < high)
    return Cascade(metric=name, low=low, high=high, model=_fit_linear(x2, y, lang, names2), options=dict(options),
                   share=round(float(inside.mean()), 4)), curve


def _band(distance: np.ndarray, threshold: float, share: float) -> tuple[float, float]:
    if share <= 0:
        return threshold, threshold
    if share >= 1:
        return 0.0, 1.0 + 1e-9
    d = float(np.quantile(distance, share))
    t = _logit(np.array([threshold]))[0]
    return _sigmoid(t - d), _sigmoid(t + d) + 1e-12


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(q / (1 - q))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _stated(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A component's options as the file keeps them: grounding's claim reading named, so that a file read later
    scores with the reading it was fitted on (backends/verdict.py reads one that does not say as grounding-2.1's)."""
    return {"claims": "verdict", **options} if name == "grounding" else dict(options)
