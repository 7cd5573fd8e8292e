"""groundtrace.testing.assert_grounded in a user's pytest suite: run by pytest in a subprocess, a grounded
answer passes and an ungrounded one fails the test with the value, threshold, reason and flagged text
(lexical values by hand: tests/hand_checked.py)."""

from __future__ import annotations

import pytest

from groundtrace.testing import assert_grounded
from tests.hand_checked import CONTEXT, ZEBRAS, ZEBRAS_REASON

pytest_plugins = ["pytester"]

USER_TESTS = f'''
from groundtrace.testing import assert_grounded

CONTEXTS = [{CONTEXT!r}]


def test_grounded_answer():
    score = assert_grounded({CONTEXT!r}, CONTEXTS, question="When does the library open?", metric="lexical")
    assert score.value == 1.0


def test_baseless_answer():
    assert_grounded({ZEBRAS!r}, CONTEXTS, question="What lives on the savanna?", metric="lexical")


def test_grounding_by_default():
    assert_grounded({CONTEXT!r}, CONTEXTS, threshold=1.0)  # grounding never reaches 1.0 on its own passage
'''


def test_in_a_pytest_run_a_grounded_answer_passes_and_a_baseless_one_fails_with_everything_to_read(pytester) -> None:
    pytester.makepyfile(test_answers=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:phoenix", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*test_baseless_answer*",
        "E *AssertionError: the answer is not grounded in its contexts:",
        "E *lexical = 0.000 (threshold 0.4: flagged when < 0.4): flagged",
        f"E *reason: {ZEBRAS_REASON}",
        'E *flagged text: "Zebras"; "gallop"; "savannas"',
    ])
    assert "scorer = get_metric" not in result.stdout.str()  # the helper's own body is hidden


def test_an_answer_that_cannot_be_scored_fails_too() -> None:
    with pytest.raises(AssertionError, match=r"could not be checked for grounding: lexical: could not score: the "
                                             r"answer is empty: there is no text to score"):
        assert_grounded("", [CONTEXT], metric="lexical")


def test_options_reach_the_metric_and_a_bare_string_is_one_context() -> None:
    assert assert_grounded(CONTEXT, CONTEXT, metric="lexical").value == 1.0
    with pytest.raises(AssertionError, match=r"lexical = 0\.000 \(threshold 0\.4"):
        assert_grounded(ZEBRAS, CONTEXT, metric="lexical")
    assert assert_grounded(ZEBRAS, CONTEXT, metric="lexical", threshold=0.0).hallucinated is False
