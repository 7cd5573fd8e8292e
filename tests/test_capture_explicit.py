"""@groundtrace.retrieval and groundtrace.turn: code with no framework callback says what the turn was.

A real Monitor (thread isolation, a collecting sink) takes the Records; the OpenTelemetry test uses the
real SDK with an in-memory exporter."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import groundtrace
from groundtrace.capture import marked
from groundtrace.capture.explicit import stats
from groundtrace.monitor import Monitor
from tests.custom_sinks import PlainSink

HOURS = "The museum opens at 9 am and closes at 6 pm every day."
PRICES = "An adult ticket costs 15 euros; children under 12 enter free."
QUESTION = "When does the museum open?"
ANSWER = "It opens at 9 am."


@dataclass
class Doc:  # a LangChain Document's shape
    page_content: str
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@groundtrace.retrieval
def search(query: str, k: int = 2) -> list[Doc]:
    return [Doc(HOURS, "hours", {"source": "hours.md"}), Doc(PRICES, "prices")][:k]


@groundtrace.retrieval(name="vector-db")
async def asearch(query: str) -> list[dict[str, Any]]:
    await asyncio.sleep(0)
    return [{"id": 1, "text": HOURS}]


@groundtrace.retrieval
def stream_search(query: str) -> Iterator[str]:
    yield HOURS
    yield PRICES


@pytest.fixture
def collected() -> Iterator[tuple[Monitor, PlainSink]]:
    sink = PlainSink()
    monitor = Monitor(metrics=["lexical"], sinks=[sink], isolation="thread", flush_at_exit=False)
    yield monitor, sink
    monitor.close()


def records(monitor: Monitor, sink: PlainSink) -> list[Any]:
    assert monitor.flush(10)
    return [record for record, _ in sink.got]


def test_a_decorated_function_returns_what_it_returned(collected):
    monitor, _ = collected
    with groundtrace.turn(QUESTION, monitor=monitor) as turn:
        assert search(QUESTION, k=1) == [Doc(HOURS, "hours", {"source": "hours.md"})]
        assert asyncio.run(asearch(QUESTION)) == [{"id": 1, "text": HOURS}]
        assert list(stream_search(QUESTION)) == [HOURS, PRICES]
        turn.answer = ANSWER
    assert [r.name for r in turn.retrievals] == ["search", "vector-db", "stream_search"]
    assert search.__name__ == "search" and asearch.__name__ == "asearch"  # functools.wraps


def test_a_turn_block_makes_one_record_of_its_question_answer_and_retrieved_contexts(collected):
    monitor, sink = collected
    with groundtrace.turn(QUESTION, monitor=monitor, metadata={"release": "v2"}) as turn:
        search(QUESTION)
        turn.answer = ANSWER

    [record] = records(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [HOURS, PRICES])
    assert record.id == turn.id and record.queries is None  # the query is the question itself
    assert record.metadata == {
        "source": "groundtrace.turn", "turn_name": None, "release": "v2",
        "contexts_from": "@groundtrace.retrieval 'search'",
        "documents": [{"id": "hours", "source": "hours.md", "metadata": {"source": "hours.md"}},
                      {"id": "prices", "source": None, "metadata": {}}],
    }


def test_a_decorated_function_is_a_turn_with_its_argument_as_question_and_return_as_answer(collected):
    monitor, sink = collected

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> dict[str, str]:
        search(f"museum hours: {question}", k=1)
        return {"answer": ANSWER}

    assert answer(QUESTION) == {"answer": ANSWER}
    [record] = records(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [HOURS])
    assert record.queries == [f"museum hours: {QUESTION}"]  # the derived query, kept beside the question
    assert record.metadata["turn_name"] == "answer"


def test_async_and_generator_turns(collected):
    monitor, sink = collected

    @groundtrace.turn(monitor=monitor)
    async def answer(question: str) -> str:
        await asearch(question)
        return ANSWER

    @groundtrace.turn(monitor=monitor)
    def streamed(question: str) -> Iterator[str]:
        search(question, k=1)
        yield "It opens "
        yield "at 9 am."

    assert asyncio.run(answer(QUESTION)) == ANSWER
    assert "".join(streamed(QUESTION)) == ANSWER
    first, second = records(monitor, sink)
    assert (first.answer, first.contexts, first.metadata["contexts_from"]) == (
        ANSWER, [HOURS], "@groundtrace.retrieval 'vector-db'")
    assert (second.answer, second.contexts) == (ANSWER, [HOURS])


def test_a_turn_takes_the_session_and_contexts_given_directly(collected):
    monitor, sink = collected
    with groundtrace.session("chat-7"), groundtrace.turn(QUESTION, monitor=monitor) as turn:
        turn.add_contexts([HOURS], name="cache")
        turn.answer = ANSWER
    [record] = records(monitor, sink)
    assert (record.session_id, record.contexts, record.metadata["contexts_from"]) == (
        "chat-7", [HOURS], "@groundtrace.retrieval 'cache'")


def test_a_turn_that_raises_is_not_scored_and_the_error_reaches_the_app(collected):
    monitor, sink = collected
    before = stats()
    with pytest.raises(ZeroDivisionError), groundtrace.turn(QUESTION, monitor=monitor):
        search(QUESTION)
        raise ZeroDivisionError
    assert records(monitor, sink) == []
    after = stats()
    assert (after.roots - before.roots, after.failed - before.failed, after.in_flight) == (1, 1, 0)


def test_a_turn_with_no_contexts_or_no_answer_says_why_once_at_warning_and_counts(collected, caplog):
    monitor, sink = collected
    marked.COUNTS.reasons.reset()
    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        for _ in range(2):
            with groundtrace.turn(QUESTION, monitor=monitor) as turn:
                turn.answer = ANSWER  # nothing marked the contexts
        with groundtrace.turn(QUESTION, monitor=monitor):
            search(QUESTION)  # and no answer

    assert records(monitor, sink) == []
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if "made no record" in r.getMessage()]
    assert lines == [
        ("WARNING", "groundtrace: a plain Python turn made no record: no contexts; nothing marked its contexts: call a "
         "function decorated with @groundtrace.retrieval inside the turn, or turn.add_contexts(...) (docs: "
         "troubleshooting, 'I see no scores') (said once; counted in stats())"),
        ("WARNING", "groundtrace: a plain Python turn made no record: no answer; the turn's function returned no text "
         "and nothing set turn.answer (said once; counted in stats())"),
    ]
    assert stats().no_record == {"no contexts": 2, "no answer": 1}
    assert monitor.stats.no_record == 3  # and the Monitor's exit summary counts them


def test_items_with_no_text_are_said_once(collected, caplog):
    monitor, sink = collected

    @groundtrace.retrieval
    def odd(query: str) -> list[Any]:
        return [HOURS, object()]

    with caplog.at_level(logging.WARNING, logger="groundtrace.capture"), \
            groundtrace.turn(QUESTION, monitor=monitor) as turn:
        odd(QUESTION)
        turn.answer = ANSWER
    [record] = records(monitor, sink)
    assert record.contexts == [HOURS]
    assert [r.getMessage() for r in caplog.records if "returned" in r.getMessage()] == [
        "groundtrace: @groundtrace.retrieval 'odd' returned 1 item(s) "
        "with no text (a string, a Document's page_content, a node's get_content(), a dict's text field): they are "
        "not contexts"]


def test_outside_any_turn_a_retrieval_waits_for_the_next_model_call_of_its_context(monkeypatch):
    assert marked.take_pending() == []
    search(QUESTION)
    assert marked.has_pending()
    [waiting] = marked.take_pending()
    assert (waiting.name, waiting.query) == ("search", QUESTION)
    assert not marked.has_pending() and marked.take_pending() == []  # taken once

    for _ in range(marked.MAX_PENDING + 3):
        search(QUESTION)
    assert len(marked.take_pending()) == marked.MAX_PENDING  # bounded
    search(QUESTION)
    monkeypatch.setattr(marked.time, "monotonic", lambda: 1e12)  # long after
    assert marked.take_pending() == []  # too old to be this model call's


def test_a_retrieval_in_another_task_waits_in_that_tasks_context_only():
    async def elsewhere() -> None:
        search(QUESTION)

    async def main() -> bool:
        await asyncio.create_task(elsewhere())  # the task ran in a copy of this context
        return marked.has_pending()

    assert asyncio.run(main()) is False


def test_a_retrieval_two_tasks_inherit_is_taken_by_one_of_them_only():
    search(QUESTION)  # before the tasks: both inherit it

    async def take() -> list[marked.Retrieved]:
        await asyncio.sleep(0)
        return marked.take_pending()

    async def main() -> list[list[marked.Retrieved]]:
        return await asyncio.gather(take(), take())

    assert sorted(len(taken) for taken in asyncio.run(main())) == [0, 1]
    assert marked.take_pending() == []  # and not again here


def test_a_failing_finder_never_reaches_the_application(collected, caplog):
    monitor, sink = collected

    def broken(retrieved: marked.Retrieved) -> bool:
        raise RuntimeError("a finder bug")

    marked.register_finder("broken", broken)
    try:
        with caplog.at_level(logging.WARNING, logger="groundtrace.capture"), \
                groundtrace.turn(QUESTION, monitor=monitor) as turn:
            search(QUESTION)  # still delivered to the turn
            turn.answer = ANSWER
    finally:
        marked.unregister_finder("broken")
    [record] = records(monitor, sink)
    assert record.contexts == [HOURS, PRICES]
    assert "the broken finder failed (RuntimeError)" in caplog.text and "a finder bug" not in caplog.text


def test_a_turn_joins_the_current_span_or_starts_its_own(collected, monkeypatch):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monitor, sink = collected
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)

    with provider.get_tracer("app").start_as_current_span("handle request") as app_span:
        with groundtrace.turn(QUESTION, monitor=monitor) as turn:
            search(QUESTION)
            turn.answer = ANSWER
    with groundtrace.turn(QUESTION, monitor=monitor) as turn:  # no span current: one of its own
        search(QUESTION)
        turn.answer = ANSWER

    joined, own = records(monitor, sink)
    context = app_span.get_span_context()
    assert (joined.trace_id, joined.span_id) == (format(context.trace_id, "032x"), format(context.span_id, "016x"))
    [request] = [span for span in exporter.get_finished_spans() if span.name == "invoke_workflow groundtrace.turn"]
    ids = request.get_span_context()
    assert (own.trace_id, own.span_id) == (format(ids.trace_id, "032x"), format(ids.span_id, "016x"))
    provider.shutdown()
