"""fit says when the fitted combination is worse than one metric alone on the same labels (out of fold), by the
target's own figure, and names that metric."""

from __future__ import annotations

from groundtrace.combine.fitting import Measured, Target, weaker_than_alone


def measured(name: str, **point: float) -> Measured:
    return Measured(name, dict(point), {})


def test_a_metric_alone_above_the_combination_is_named_by_the_targets_figure():
    combined = measured("combined", f1=0.909, auc=0.95, balanced_accuracy=0.9)
    alone = [measured("grounding", f1=1.0, auc=1.0, balanced_accuracy=1.0), measured("lexical", f1=0.5, auc=0.7)]
    said = weaker_than_alone(combined, alone, Target.parse("f1"))
    assert said == ("the combination's out-of-fold F1 (0.909) is below grounding alone (1.000) on these labels: score "
                    "with grounding alone (-m grounding; `groundtrace bench` picks its threshold), or label more answers "
                    "and fit again")
    # a cost target has no figure of its own here: ROC AUC decides
    assert "ROC AUC (0.950) is below grounding alone (1.000)" in weaker_than_alone(combined, alone, Target.parse("cost=5:1"))


def test_a_combination_at_least_as_good_says_nothing():
    combined = measured("combined", f1=0.9004, auc=0.9)
    assert weaker_than_alone(combined, [measured("grounding", f1=0.9001, auc=0.95)], Target.parse("f1")) is None
    assert weaker_than_alone(combined, [], Target.parse("f1")) is None
