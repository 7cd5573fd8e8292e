"""The verdict file's model: hand-computed probabilities, contributions and the file's checks."""

import json
import math

import pytest

from groundtrace.backends.verdict import Cascade, Component, LinearModel, VerdictFileError, VerdictModel, log_odds, sigmoid

MODEL = LinearModel(features=["a", "b"], mean=[0.0, 0.0], scale=[1.0, 2.0], coef=[1.0, 2.0], intercept=-1.0,
                    language_offsets={"ru": 0.5})
B_AT_2 = sigmoid(2.0)  # a value whose log-odds are exactly 2


def test_the_probability_by_hand():
    # a = 0.5: log-odds 0, standardized 0, adds 0; b: log-odds 2, standardized 2/2 = 1, times 2 adds 2
    p, parts = MODEL.probability({"a": 0.5, "b": B_AT_2}, "ru")
    assert p == pytest.approx(sigmoid(-1.0 + 0.5 + 0.0 + 2.0))  # 0.8176
    assert p == pytest.approx(0.817574, abs=1e-6)
    assert [(c.metric, round(c.weight, 9)) for c in parts] == [("a", 0.0), ("b", 2.0)]
    # a language the fit had no offset for gets none
    assert MODEL.probability({"a": 0.5, "b": B_AT_2}, "zh")[0] == pytest.approx(sigmoid(1.0))


def test_a_failed_component_enters_at_its_fit_mean():
    p, parts = MODEL.probability({"a": None, "b": 0.5}, None)
    assert p == pytest.approx(sigmoid(-1.0))
    assert parts[0].value is None and parts[0].weight == 0.0


def test_values_at_0_and_1_are_clipped_to_finite_log_odds():
    assert log_odds(0.0) == pytest.approx(math.log(1e-4 / (1 - 1e-4)))
    assert log_odds(1.0) == pytest.approx(-log_odds(0.0))
    assert 0.0 < MODEL.probability({"a": 1.0, "b": 1.0}, "ru")[0] < 1.0


def verdict(**changes):
    return VerdictModel(components=[Component("a"), Component("b", {"k": 1})], model=MODEL, threshold=0.4,
                        cascade=Cascade("judge", 0.3, 0.6, MODEL), **changes)


def test_the_file_round_trips(tmp_path):
    path = tmp_path / "v.json"
    verdict(fitted={"records": 10}).save(path)
    loaded = VerdictModel.load(path)
    assert loaded == verdict(fitted={"records": 10})
    assert json.loads(path.read_text())["format"] == "groundtrace-verdict/1"
    assert loaded.cascade is not None and loaded.cascade.covers(0.3) and not loaded.cascade.covers(0.6)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda raw: raw.update(format="other/2"), "format 'other/2'"),
    (lambda raw: raw.update(threshold=1.5), "threshold 1.5 is not in [0, 1]"),
    (lambda raw: raw["model"].update(scale=[1.0, 0.0]), "a feature scale must be positive"),
    (lambda raw: raw["model"].update(coef=[1.0]), "one mean, scale and coefficient per feature"),
    (lambda raw: raw["model"].update(coef=[1.0, float("nan")]), "not finite"),
    (lambda raw: raw["components"].pop(), "its components and its model's features differ"),
    (lambda raw: raw.pop("model"), "'model'"),
])
def test_a_broken_file_says_which_and_what(tmp_path, edit, message):
    raw = verdict().to_dict()
    edit(raw)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(VerdictFileError, match=r"verdict file .*broken\.json is not a verdict written by `groundtrace fit`") as error:
        VerdictModel.load(path)
    assert message in str(error.value)


def test_a_missing_or_unreadable_file_says_so(tmp_path):
    with pytest.raises(VerdictFileError, match="does not exist: write one with `groundtrace fit -o "):
        VerdictModel.load(tmp_path / "none.json")
    (tmp_path / "junk.json").write_bytes(b"\x00\xff{")
    with pytest.raises(VerdictFileError, match="is not readable JSON"):
        VerdictModel.load(tmp_path / "junk.json")
