"""mask= on the handler and on instrument(): a real LCEL chain's question, contexts and answer are
masked before the Monitor's metrics and sinks see them, off the request path; the chain itself is
untouched, and a mask that fails leaves it untouched too."""

from __future__ import annotations

from groundtrace.monitor import Monitor
from lc_app import CollectingSink, rag_chain

import groundtrace_langchain
from groundtrace_langchain import GroundtraceCallbackHandler

QUESTION = "What is the capital of France, Paris or Lyon?"
ANSWER = "Paris is the capital of France and of Germany since 1990."


def hide_city(text: str) -> str:
    return text.replace("Paris", "<city>")


def assert_masked(sink: CollectingSink) -> None:
    [(record, [score])] = sink.emitted
    assert record.question == hide_city(QUESTION)
    assert record.contexts == ["<city> is the capital of France."]
    assert record.answer == hide_city(ANSWER)
    assert score.spans and all(record.answer[s.start:s.end] == s.text for s in score.spans)


def test_a_handler_that_builds_its_monitor_masks_through_it() -> None:
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[sink], mask=hide_city, flush_at_exit=False)
    try:
        assert rag_chain(ANSWER).invoke(QUESTION, config={"callbacks": [handler]}) == ANSWER
        assert handler.monitor.mask is None and handler.monitor.flush(10)  # it goes with each Record
    finally:
        handler.close()
    assert_masked(sink)


def test_a_handler_on_your_monitor_sends_its_mask_with_each_record(monitor: Monitor, sink: CollectingSink) -> None:
    handler = GroundtraceCallbackHandler(monitor=monitor, mask=hide_city)
    rag_chain(ANSWER).invoke(QUESTION, config={"callbacks": [handler]})
    assert monitor.mask is None and monitor.flush(10)
    assert_masked(sink)


def test_instrument_with_a_mask(monitor: Monitor, sink: CollectingSink) -> None:
    groundtrace_langchain.instrument(monitor=monitor, mask=hide_city)
    rag_chain(ANSWER).invoke(QUESTION)
    groundtrace_langchain.uninstrument()
    assert monitor.flush(10)
    assert_masked(sink)


def test_a_mask_that_raises_sends_only_the_id_and_errors(monitor: Monitor, sink: CollectingSink) -> None:
    def broken(text: str) -> str:
        raise KeyError(text)

    handler = GroundtraceCallbackHandler(monitor=monitor, mask=broken)
    assert rag_chain(ANSWER).invoke(QUESTION, config={"callbacks": [handler]}) == ANSWER
    assert monitor.flush(10)
    [(record, [score])] = sink.emitted
    assert (record.question, record.contexts, record.answer, record.trace_id) == (None, None, None, None)
    assert record.id is not None and score.error.startswith("invalid record: the mask raised KeyError")
    assert "Paris" not in score.error and monitor.stats.failed == 1


def test_the_handlers_mask_runs_before_the_environments(monkeypatch) -> None:
    monkeypatch.setenv("GROUNDTRACE_MASK", "builtins:str.upper")
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[sink], mask=hide_city, flush_at_exit=False)
    try:
        rag_chain(ANSWER).invoke(QUESTION, config={"callbacks": [handler]})
        assert handler.monitor.mask is str.upper and handler.monitor.flush(10)
    finally:
        handler.close()
    [(record, _)] = sink.emitted
    assert record.answer == hide_city(ANSWER).upper()  # "<CITY> IS ...": hidden first, then upper-cased


def test_the_mask_covers_the_status_of_the_span_groundtrace_records_for_a_failed_request(global_tracer_provider):
    """The app raises with the user's e-mail in its message; the request span groundtrace records (no tracer here)
    carries the error status through the handler's mask, and groundtrace.turn's span does the same."""
    import re

    import groundtrace
    from langchain_core.runnables import RunnableLambda

    _, exporter = global_tracer_provider

    def hide_email(text: str) -> str:
        return re.sub(r"[\w.]+@[\w.]+", "<email>", text)

    def look_up(question: str) -> str:
        raise ValueError(f"no account found for {question}")

    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[CollectingSink()], mask=hide_email,
                                         flush_at_exit=False)
    try:
        try:
            RunnableLambda(look_up).invoke("ana.lopez@example.com", config={"callbacks": [handler]})
        except ValueError:
            pass

        @groundtrace.turn(monitor=handler.monitor, mask=hide_email)
        def answer(question: str) -> str:
            raise ValueError(f"no account found for {question}")

        try:
            answer("bo.chen@example.org")
        except ValueError:
            pass
    finally:
        handler.close()
    statuses = [span.status.description for span in exporter.get_finished_spans()]
    assert statuses == ["ValueError: no account found for <email>"] * 2
