"""Fitting a verdict: thresholds for each target, calibration error and bootstrap by hand, and a fit
on data whose answer is known."""

import numpy as np
import pytest

from groundtrace.measure.classification import roc_auc
from groundtrace.combine.fitting import Target, calibration_error, check_labels, features, fit, measured, predict

P = np.array([0.9, 0.8, 0.7, 0.4, 0.2])
Y = np.array([1, 1, 0, 1, 0])


@pytest.mark.parametrize(("spec", "threshold"), [
    # F1 at 0.4: precision 3/4, recall 1 -> 0.857; at 0.8: 1 and 2/3 -> 0.8
    ("f1", 0.4),
    # precision by cut, strictest first: 1, 1, 2/3, 3/4, 3/5: the most recall with >= 0.75 is at 0.4
    ("precision>=0.75", 0.4),
    ("precision>=0.9", 0.8),
    # recall by cut: 1/3, 2/3, 2/3, 1, 1: the strictest reaching 0.6 is 0.8
    ("recall>=0.6", 0.8),
    ("recall>=100%", 0.4),
    # flagged by cut: 1, 2, 3, 4, 5 of 5: at most 40% flagged is 0.8
    ("rate=0.4", 0.8),
    ("rate=0.1", 0.9),  # no cut flags as few: the strictest
])
def test_the_threshold_of_each_target_by_hand(spec, threshold):
    assert Target.parse(spec).threshold(P, Y) == threshold


@pytest.mark.parametrize("bad", ["precision", "recall>=2", "rate=0", "accuracy>=0.9", ""])
def test_a_target_that_is_not_one_says_what_is(bad):
    with pytest.raises(ValueError, match="use balanced_accuracy, mcc, f1, cost=5:1 .*, precision>=0.8, recall>=0.9 or rate=0.1|is not a share"):
        Target.parse(bad)


def test_calibration_error_by_hand():
    # four bins of one record each: |0.05 - 0|, |0.95 - 1|, |0.55 - 1|, |0.45 - 0|, each a quarter of the records
    assert calibration_error(np.array([0, 1, 1, 0]), np.array([0.05, 0.95, 0.55, 0.45])) == pytest.approx(0.25)
    # one bin holding both: |mean 0.55 - rate 0.5|
    assert calibration_error(np.array([0, 1]), np.array([0.52, 0.58])) == pytest.approx(0.05)


def test_intervals_resample_groups_and_hold_the_point():
    y = np.array([1, 0] * 20)
    p = np.linspace(0.3, 0.7, 40) + np.where(y == 1, 0.1, 0.0)
    result = measured("x", y, p, p >= 0.5, np.repeat(np.arange(20), 2), draws=300, seed=0)
    assert result.point["auc"] == pytest.approx(roc_auc(y, p))
    low, high = result.interval["auc"]
    assert low <= result.point["auc"] <= high and high - low > 0


def test_too_few_labels_are_refused_and_few_are_warned_about():
    with pytest.raises(ValueError, match="too few labels to fit: 20 records, 10 labelled 1 and 10 labelled 0"):
        check_labels(np.array([0, 1] * 10))
    with pytest.raises(ValueError, match="5 labelled 1"):
        check_labels(np.array([1] * 5 + [0] * 95))
    assert "only 60 labelled records" in check_labels(np.array([0, 1] * 30))[0]
    assert check_labels(np.array([0, 1] * 60)) == []


def synthetic(n=400, seed=0):
    """Metric a separates the labels, metric b is noise, metric c is a's mirror (higher = supported,
    already oriented here as a hallucination value)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    a = 1 / (1 + np.exp(-(2.0 * y - 1.0 + rng.normal(0, 1.0, n))))
    b = rng.uniform(0.05, 0.95, n)
    languages = np.where(rng.uniform(size=n) < 0.5, "en", "ru")
    return np.stack([a, b], axis=1), y, languages


def test_a_fit_weights_the_informative_metric_and_ignores_noise():
    h, y, languages = synthetic()
    result = fit(h, y, languages, [str(i) for i in range(len(y))], ["a", "b"], Target("f1"), draws=200, learning_repeats=5)
    model = result.verdict.model
    assert model.coef[0] > 1.0 and abs(model.coef[1]) < 0.25
    # out of fold, the combination ranks as well as a alone (it is a, rescaled), and b alone is chance
    combined, (a_alone, b_alone) = result.combined.point, [m.point for m in result.alone]
    assert combined["auc"] == pytest.approx(a_alone["auc"], abs=0.02)
    assert abs(b_alone["auc"] - 0.5) < 0.08
    # calibrated: the combination's probabilities match the observed rates; a's raw values less so
    assert combined["calibration_error"] < 0.06
    # the learning curve's rows and the full CV row
    assert [row["labels"] for row in result.learning_curve] == [25, 50, 100, 400]
    assert result.stable_at in (25, 50, 100)
    # the final model reproduces what the file says
    x = features(h)
    p = predict(model, x, languages)
    assert p[0] == pytest.approx(model.probability({"a": h[0, 0], "b": h[0, 1]}, languages[0])[0])
    assert result.verdict.threshold == Target("f1").threshold(result.oof, y)


def test_a_metric_that_scored_nothing_cannot_be_a_component():
    h, y, languages = synthetic(100)
    h[:, 1] = np.nan
    with pytest.raises(ValueError, match="metric b scored none of the 100 records"):
        fit(h, y, languages, [str(i) for i in range(100)], ["a", "b"], Target("f1"), draws=50, learning_repeats=2)


def test_a_metric_that_failed_on_some_records_is_said():
    h, y, languages = synthetic(100)
    h[:7, 1] = np.nan
    result = fit(h, y, languages, [str(i) for i in range(100)], ["a", "b"], Target("f1"), draws=50, learning_repeats=2)
    assert "b failed on 7 of 100 records: its mean stands in for them" in result.warnings


def test_the_cascade_band_holds_the_share_nearest_the_threshold():
    h, y, languages = synthetic(300)
    rng = np.random.default_rng(1)
    judge = np.where(y == 1, 0.9, 0.1) + rng.normal(0, 0.05, len(y))  # a near-perfect costly metric
    result = fit(h, y, languages, [str(i) for i in range(len(y))], ["a", "b"], Target("f1"), costly=("judge", np.clip(judge, 0, 1)),
                 share=0.3, draws=50, learning_repeats=2)
    cascade = result.verdict.cascade
    assert cascade is not None and cascade.metric == "judge"
    assert cascade.low < result.verdict.threshold < cascade.high
    assert cascade.share == pytest.approx(0.3, abs=0.02)
    assert cascade.model.features == ["a", "b", "judge"] and cascade.model.coef[2] > 1.0
    by_share = {row["share"]: row for row in result.cascade_curve}
    assert by_share[0.0]["escalated"] == 0 and by_share[1.0]["escalated"] == len(y)
    # sending the uncertain band to a near-perfect judge raises F1 above the cheap signals alone
    assert by_share[0.3]["f1"] > by_share[0.0]["f1"] + 0.05


def test_without_scikit_learn_fit_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)  # an import of it raises ImportError
    h, y, languages = synthetic(100)
    with pytest.raises(ImportError, match=r"groundtrace fit needs optional dependencies .*pip install "):
        fit(h, y, languages, [str(i) for i in range(100)], ["a", "b"], Target("f1"), draws=10, learning_repeats=1)
