"""A platform's label value as fit's 0/1 (1 = unsupported): the documented defaults, the user's map, the
cut for numbers, and errors that name the value nobody mapped."""

import pytest

from groundtrace.io.label_values import SUPPORTED, UNSUPPORTED, LabelMap, LabelValueError, unmapped_error

DEFAULT = LabelMap.parse()


@pytest.mark.parametrize(("score", "category", "label"), [
    (True, None, 0), (False, None, 1),  # booleans: true = supported
    (0.49, None, 1), (0.5, None, 0), (1, None, 0), (0, None, 1),  # [0, 1]: below 0.5 unsupported
    (None, "incorrect", 1), (None, "Correct", 0), (None, "HALLUCINATED", 1), (None, "grounded", 0),
    (None, "Not_Grounded", 1), (None, "not-grounded", 1), (None, " pass ", 0), (None, "no", 1), (None, "yes", 0),
    (None, "0.2", 1),  # a number kept as text
    (1.0, "incorrect", 1),  # a known category wins over the score beside it (LangSmith keeps both)
    (0.2, "meh", 1),  # an unknown category falls back on its score
])
def test_the_defaults(score, category, label):
    assert DEFAULT.label(score, category) == label


def test_the_documented_lists():
    assert {"incorrect", "unsupported", "hallucinated", "fail", "no"} <= set(UNSUPPORTED)
    assert {"correct", "supported", "grounded", "pass", "yes"} <= set(SUPPORTED)
    assert not set(UNSUPPORTED) & set(SUPPORTED)


def test_the_users_map_and_cuts():
    mapped = LabelMap.parse("bad=unsupported, good = supported,correct=unsupported")
    assert [mapped.label(None, v) for v in ("bad", "GOOD", "correct", "incorrect")] == [1, 0, 1, 1]
    inverted = LabelMap.parse("true=unsupported,false=supported")  # a label named 'hallucinated'
    assert [inverted.label(True, None), inverted.label(False, None)] == [1, 0]
    assert [LabelMap.parse(below=0.8).label(v, None) for v in (0.79, 0.8)] == [1, 0]
    assert [LabelMap.parse(above=0.5).label(v, None) for v in (0.5, 0.51, 0.9)] == [0, 1, 1]
    ratings = LabelMap.parse("1=unsupported,2=unsupported,3=supported,4=supported,5=supported")
    assert [ratings.label(v, None) for v in (1, 2.0, 3, 5)] == [1, 1, 0, 0]
    assert [LabelMap.parse(below=3).label(v, None) for v in (1, 2.9, 3, 5)] == [1, 1, 0, 0]


def test_values_that_map_to_nothing_are_named():
    with pytest.raises(LabelValueError, match=r"'meh' is not a value these labels map: name it with --label-map \"meh=unsupported\""):
        DEFAULT.label(None, "meh")
    with pytest.raises(LabelValueError, match=r"4 is outside \[0, 1\]: say where unsupported starts with --label-unsupported-below"):
        DEFAULT.label(4, None)
    error = unmapped_error([f"v{i}" for i in range(7)] + ["v0"], "quality")
    assert str(error) == "labels named 'quality': v0; v1; v2; v3; v4 (and 2 more)"


@pytest.mark.parametrize(("mapping", "below", "above", "message"), [
    ("bad", None, None, "--label-map entry 'bad': write VALUE=unsupported or VALUE=supported"),
    ("bad=wrong", None, None, "--label-map entry 'bad=wrong'"),
    ("=unsupported", None, None, "--label-map entry '=unsupported'"),
    (None, 0.5, 0.5, "give --label-unsupported-below or --label-unsupported-above, not both"),
])
def test_a_bad_map_says_how_to_write_one(mapping, below, above, message):
    with pytest.raises(ValueError, match=message):
        LabelMap.parse(mapping, below, above)
