"""The combined metric: its value is the verdict file's model over its components' real Scores, it
escalates the uncertain band to a costly metric within a spend budget, and it never hides a failure."""

import json

import pytest

from groundtrace.backends.verdict import Cascade, Component, LinearModel, VerdictModel
from groundtrace.metrics import get_metric
from groundtrace.metrics.combined import DEFAULT_FILE, CombinedMetric
from groundtrace.score import Cost

from .scripted import INVENTED, SUPPORTED, ScriptedJudge

pytestmark = pytest.mark.usefixtures("scripted_metrics")

def write(tmp_path, components, model, threshold=0.5, cascade=None, name="v.json"):
    path = tmp_path / name
    VerdictModel(components=[Component(c) for c in components], model=model, threshold=threshold, cascade=cascade).save(path)
    return path


LEXICAL_ONLY = LinearModel(features=["lexical"], mean=[0.0], scale=[1.0], coef=[1.0], intercept=0.0)


def test_the_shipped_verdict_scores_with_its_components():
    metric = CombinedMetric()
    assert metric.file == DEFAULT_FILE and metric.threshold == VerdictModel.load(DEFAULT_FILE).threshold
    score = metric.score(INVENTED)
    assert score.ok and score.metric == "combined" and not score.higher_is_better
    # the shipped verdict was fitted on grounding-2.1's values: its file does not name a claim reading
    assert metric.components[0].claims == "xe"
    parts = {c.name: c.score(INVENTED) for c in metric.components}
    expected, _ = metric.combination.model.probability({n: s.hallucination_score for n, s in parts.items()}, "en")
    assert score.value == pytest.approx(expected, abs=1e-6)
    assert score.hallucinated == (score.value >= metric.threshold)
    assert set(score.details["components"]) == {"grounding", "lexical", "facts"}
    assert score.reason.startswith(("unsupported: probability", "supported: probability"))
    for name in ("grounding", "lexical", "facts"):
        assert name in score.reason
    # the invented answer is flagged, the supported one is not
    assert score.hallucinated is True
    assert metric.score(SUPPORTED).hallucinated is False


def test_the_value_is_the_file_model_over_the_components_by_hand(tmp_path):
    path = write(tmp_path, ["lexical"], LEXICAL_ONLY, threshold=0.3)
    lexical = get_metric("lexical").score(INVENTED)
    score = get_metric("combined", file=str(path)).score(INVENTED)
    h = lexical.hallucination_score
    # sigmoid(0 + 1 * log(h / (1 - h))) is h itself
    assert score.value == pytest.approx(min(max(h, 1e-4), 1 - 1e-4), abs=1e-9)
    assert score.threshold == 0.3 and score.details["file"] == "v.json"


def test_the_file_comes_from_the_option_else_the_environment(tmp_path, monkeypatch):
    path = write(tmp_path, ["lexical"], LEXICAL_ONLY, name="team.json")
    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(path))
    assert get_metric("combined").file == path
    other = write(tmp_path, ["lexical"], LEXICAL_ONLY, name="other.json")
    assert get_metric("combined", file=str(other)).file == other


def test_spans_are_the_union_of_the_drivers_spans(tmp_path):
    model = LinearModel(features=["span_maker"], mean=[0.0], scale=[1.0], coef=[1.0], intercept=0.0)
    score = get_metric("combined", file=str(write(tmp_path, ["span_maker"], model))).score(INVENTED)
    answer = INVENTED["answer"]
    assert score.hallucinated is True
    assert [(s.start, s.end, s.text) for s in score.spans] == [(0, 12, answer[0:12])]


def test_a_supported_verdict_points_at_no_spans(tmp_path):
    model = LinearModel(features=["span_maker"], mean=[0.0], scale=[1.0], coef=[1.0], intercept=-10.0)
    score = get_metric("combined", file=str(write(tmp_path, ["span_maker"], model))).score(INVENTED)
    assert score.hallucinated is False and score.spans == []


def cascading(tmp_path, **options):
    # the cheap model gives every record probability 0.5 (intercept 0, no weight): all of them in the band
    cheap = LinearModel(features=["lexical"], mean=[0.0], scale=[1.0], coef=[0.0], intercept=0.0)
    decide = LinearModel(features=["lexical", "scripted_judge"], mean=[0.0, 0.0], scale=[1.0, 1.0], coef=[0.0, 1.0],
                         intercept=0.0)
    path = write(tmp_path, ["lexical"], cheap, threshold=0.5, cascade=Cascade("scripted_judge", 0.4, 0.6, decide))
    return get_metric("combined", file=str(path), **options)


def test_the_uncertain_band_is_decided_with_the_costly_metric(tmp_path):
    metric = cascading(tmp_path)
    invented, supported = metric.score(INVENTED), metric.score(SUPPORTED)
    assert invented.details["escalated"] is True and invented.details["cheap_probability"] == 0.5
    assert invented.value == pytest.approx(0.95) and invented.hallucinated is True  # sigmoid(logit(0.95))
    assert supported.value == pytest.approx(0.05) and supported.hallucinated is False
    assert invented.cost == Cost(input_tokens=100, output_tokens=10, usd=0.01)
    assert "scripted_judge" in invented.details["components"] and "scripted_judge 0.95" in invented.reason


def test_the_spend_budget_stops_escalating_for_the_hour(tmp_path):
    metric = cascading(tmp_path, budget_usd_per_hour=0.015)
    first, second, third = (metric.score(INVENTED) for _ in range(3))
    assert [s.details["escalated"] for s in (first, second, third)] == [True, True, False]
    assert len(ScriptedJudge.calls) == 2
    assert third.value == 0.5 and "the spend budget of this hour is used up" in third.reason


def test_escalation_can_be_switched_off_and_a_failing_costly_metric_is_said(tmp_path):
    off = cascading(tmp_path, escalate=False).score(INVENTED)
    assert off.details["escalated"] is False and "not escalated (escalate=false)" in off.reason and ScriptedJudge.calls == []
    down = cascading(tmp_path).score({**INVENTED, "answer": "An answer the judge cannot read."})
    assert down.ok and down.value == 0.5 and down.details["escalated"] is False
    assert "scripted_judge could not decide (RuntimeError: the judge is down): the cheap signals did" in down.reason


def test_every_component_failing_is_an_error_score_with_their_reasons(tmp_path):
    path = write(tmp_path, ["scripted_judge"], LinearModel(features=["scripted_judge"], mean=[0.0], scale=[1.0], coef=[1.0],
                                                          intercept=0.0))
    score = get_metric("combined", file=str(path)).score({**INVENTED, "answer": "Unscripted."})
    assert not score.ok and score.value is None
    assert score.error == "every component failed: scripted_judge: RuntimeError: the judge is down"


def test_a_missing_file_is_an_error_that_names_it(tmp_path):
    with pytest.raises(ValueError, match="verdict file .*nowhere.json does not exist"):
        get_metric("combined", file=str(tmp_path / "nowhere.json"))


def test_the_shipped_file_names_what_it_was_fitted_on():
    raw = json.loads(DEFAULT_FILE.read_text())
    assert raw["fitted"]["recipe"] == "training/verdict.py"
    assert [c["metric"] for c in raw["components"]] == ["grounding", "lexical", "facts"]
    assert {"en", "ru", "zh"} <= set(raw["model"]["language_offsets"])
