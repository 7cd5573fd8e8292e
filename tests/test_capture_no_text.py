"""No verdict from nothing: a @groundtrace.retrieval whose return value holds no text (None, bytes, objects with no
text field) is said once, naming the function and what it returned, and its turn's Scores are errors saying so;
never hallucinated=True. A numpy array of texts is read as the list it holds; an empty result stays a search that
found nothing."""

from __future__ import annotations

import logging

import pytest

import groundtrace
from groundtrace.monitor import Monitor
from tests.custom_sinks import PlainSink

QUESTION, ANSWER = "When does the museum open?", "It opens at 9 am."


class Hit:  # a vector database's result object with no text field groundtrace knows
    def __init__(self, score: float) -> None:
        self.score = score


def turn_with(value, name: str, monitor: Monitor):
    @groundtrace.retrieval(name=name)
    def search(question: str):
        return value

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> str:
        search(question)
        return ANSWER

    return answer


@pytest.mark.parametrize(("value", "said"), [
    (None, "returned None"),
    (b"The museum opens at 9 am.", "returned bytes (decode it to str)"),
    ([Hit(0.9), Hit(0.7)], "returned 2 item(s) of type Hit with no text"),
])
def test_a_retrieval_with_no_text_gives_error_scores_that_say_why(value, said, caplog):
    sink = PlainSink()
    name = f"search_{type(value).__name__}"
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        with Monitor(["lexical", "facts"], [sink], isolation="thread", flush_at_exit=False) as monitor:
            turn_with(value, name, monitor)(QUESTION)
            turn_with(value, name, monitor)(QUESTION)
            assert monitor.flush(30)
    reason = f"no contexts to check the answer against: @groundtrace.retrieval {name!r} {said}"
    assert [[(s.value, s.hallucinated, s.error) for s in scores] for _, scores in sink.got] == \
        [[(None, None, reason), (None, None, reason)]] * 2
    warnings = [r.getMessage() for r in caplog.records if f"@groundtrace.retrieval {name!r} {said}" in r.getMessage()]
    assert len(warnings) == 1  # said once per function and kind of value


def test_a_numpy_array_of_texts_is_read_as_its_list():
    numpy = pytest.importorskip("numpy")
    sink = PlainSink()
    with Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        turn_with(numpy.array(["The museum opens at 9 am."]), "search_array", monitor)(QUESTION)
        assert monitor.flush(30)
    [(record, [score])] = sink.got
    assert record.contexts == ["The museum opens at 9 am."] and score.ok  # scored against the passage it held


def test_an_empty_result_is_a_search_that_found_nothing_not_an_unreadable_one():
    sink = PlainSink()
    with Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        turn_with([], "search_empty", monitor)(QUESTION)
        assert monitor.flush(30)
    [(record, _)] = sink.got
    assert record.contexts == [] and "contexts_unreadable" not in record.metadata
