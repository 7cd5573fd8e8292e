"""Locating the judge's verbatim excerpts in the answer (groundtrace.text.spans)."""

from __future__ import annotations

import pytest

from groundtrace.metrics.judged.fence import neutralise
from groundtrace.text.spans import first_located, locate

ANSWER = "Tesla was  founded in 2004 by “Martin Eberhard”.\nIt is based in Austin — Texas."


@pytest.mark.parametrize("excerpt, found", [
    ("founded in 2004", "founded in 2004"),                      # exact
    ("was founded in 2004", "was  founded in 2004"),             # whitespace runs differ
    ('by "martin eberhard"', "by “Martin Eberhard”"),            # case and typographic quotes
    ("Austin - Texas.", "Austin — Texas"),                       # dashes; trailing punctuation trimmed
    ("based in Austin — Texas", "based in Austin — Texas"),
])
def test_locate(excerpt, found):
    start, end = locate(ANSWER, excerpt)
    assert ANSWER[start:end] == found


@pytest.mark.parametrize("excerpt", ["founded in 2005", "", "  ", "in", None])
def test_not_located(excerpt):
    assert locate(ANSWER, excerpt) is None


def test_first_located_falls_back_to_the_statement():
    assert first_located(ANSWER, "a quote that is not there", "It is based in Austin") == (49, 70)
    assert locate("Use ‹data tags", "Use <data tags") == (0, 14)  # our own fence neutralisation
    assert locate("Use <data tags", neutralise("Use <data tags")) == (0, 14)  # a judge copying a fenced text
    assert locate("北京是中国的首都。", "中国的首都") == (3, 8)
