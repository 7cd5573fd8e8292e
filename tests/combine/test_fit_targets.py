"""Targets that survive skew: balanced accuracy, MCC and a cost ratio, computed by hand on a toy set where
68% of the answers are unsupported, and the warning for a threshold that flags nearly all or nearly none."""

import numpy as np
import pytest

from groundtrace.combine.fitting import DEFAULT_TARGET, Target, _figures, fit, flag_share_warning, mcc

# 25 answers ranked by p, strictest first: the 10 most suspect are unsupported, then 8 supported, then 7
# unsupported the metric missed. 17 of 25 (68%) are unsupported.
P = np.arange(25, 0, -1) / 26
Y = np.array([1] * 10 + [0] * 8 + [1] * 7)
TOP10, ALL = P[9], P[24]


@pytest.mark.parametrize(("spec", "threshold"), [
    # F1 flagging all: precision 17/25, recall 1 -> 34/42 = 0.810; at the top 10: 20/27 = 0.741; nothing between is higher
    ("f1", ALL),
    # balanced accuracy at the top 10: (10/17 + 8/8) / 2 = 0.794; flagging all: (1 + 0) / 2 = 0.5
    ("balanced_accuracy", TOP10),
    ("balanced-accuracy", TOP10),
    # MCC at the top 10: (10*8 - 0*7) / sqrt(10*17*8*15) = 0.560; at the top 9: 72 / sqrt(9*17*8*16) = 0.515; flagging all: 0
    ("mcc", TOP10),
    # cost FN:FP = 1:1: the top 10 miss 7 and flag none wrongly (7); flagging all: 8 false flags (8)
    ("cost=1:1", TOP10),
    # 5:1: the top 10 cost 5*7 = 35; flagging all costs 8: when a miss costs five false flags, flag all
    ("cost=5:1", ALL),
    ("cost=10:2", ALL),
])
def test_each_target_by_hand_on_a_skewed_set(spec, threshold):
    assert Target.parse(spec).threshold(P, Y) == threshold


def test_the_figures_at_each_threshold_by_hand():
    at_top10 = _figures(Y, P, P >= TOP10)
    assert at_top10["balanced_accuracy"] == pytest.approx((10 / 17 + 1) / 2)
    assert at_top10["mcc"] == pytest.approx(80 / np.sqrt(10 * 17 * 8 * 15))
    assert at_top10["f1"] == pytest.approx(20 / 27)
    at_all = _figures(Y, P, P >= ALL)
    assert (at_all["f1"], at_all["balanced_accuracy"], at_all["mcc"], at_all["flagged_rate"]) == (
        pytest.approx(34 / 42), 0.5, 0.0, 1.0)
    assert mcc(0, 0, 5, 5) == 0.0  # no flags: no correlation, not a division by zero


def test_names_and_the_default():
    assert DEFAULT_TARGET == "balanced_accuracy"
    assert [str(Target.parse(s)) for s in ("balanced_accuracy", "bacc", "MCC", "cost=5:1", "cost=10:4", "f1")] == [
        "balanced_accuracy", "balanced_accuracy", "mcc", "cost=5:1", "cost=2.5:1", "f1"]


@pytest.mark.parametrize("bad", ["cost=5", "cost=0:1", "cost=1:0", "cost=a:b", "accuracy", "mcc>=0.5"])
def test_a_bad_target_lists_the_targets(bad):
    with pytest.raises(ValueError, match=r"balanced_accuracy, mcc, f1, cost=5:1|two positive numbers"):
        Target.parse(bad)


def test_the_flag_share_warning_bounds():
    f1 = Target("f1")
    assert flag_share_warning(0.90, 100, 68, f1) is None and flag_share_warning(0.02, 100, 68, f1) is None
    assert flag_share_warning(0.91, 100, 68, f1) == (
        "the threshold chosen for f1 flags 91% of the 100 labelled answers (68 labelled unsupported, 68%): it flags "
        "nearly every answer; try --target balanced_accuracy or mcc")
    assert "flags 1% of the 100 labelled answers" in flag_share_warning(0.01, 100, 68, f1)
    assert "nearly no answer" in flag_share_warning(0.01, 100, 68, f1)
    assert "check each with groundtrace bench" in flag_share_warning(0.95, 100, 68, Target("mcc"))


def skewed(n=120, seed=1):
    """About 68% unsupported (67% with this seed); metric a separates the classes weakly, b is noise."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.68).astype(int)
    a = 1 / (1 + np.exp(-(0.4 * (2.0 * y - 1.0) + rng.normal(0, 1.0, n))))
    return np.stack([a, rng.uniform(0.05, 0.95, n)], axis=1), y


def test_on_a_skewed_fit_f1_flags_nearly_all_and_warns_where_balanced_accuracy_does_not():
    h, y = skewed()
    ids = [str(i) for i in range(len(y))]
    by_f1 = fit(h, y, ["en"] * len(y), ids, ["a", "b"], Target("f1"), draws=50, learning_repeats=2)
    by_bacc = fit(h, y, ["en"] * len(y), ids, ["a", "b"], Target.parse(DEFAULT_TARGET), draws=50, learning_repeats=2)
    assert by_f1.flagged_share > 0.9 and by_bacc.flagged_share < 0.9
    assert any("the threshold chosen for f1 flags" in w for w in by_f1.warnings)
    assert by_f1.report()["flagged_share"] == round(by_f1.flagged_share, 4)
    assert not any("the threshold chosen" in w for w in by_bacc.warnings)
    # out of fold, balanced accuracy at its own threshold beats balanced accuracy at F1's
    assert by_bacc.combined.point["balanced_accuracy"] > by_f1.combined.point["balanced_accuracy"]
    assert by_bacc.verdict.target == "balanced_accuracy" and by_f1.verdict.threshold < by_bacc.verdict.threshold
