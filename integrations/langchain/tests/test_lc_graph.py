"""The handler on a LangGraph StateGraph: retrieve (vector store) -> generate (fake chat model)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from groundtrace_langchain import GroundtraceCallbackHandler
from lc_app import BY_ID, GROUNDED_ANSWER, rag_graph

QUESTION = "What is the capital of France?"
PARIS = BY_ID["en-paris"]
EXPECTED_DOCUMENTS = [{"id": "en-paris", "source": "france.md", "metadata": {"source": "france.md", "page": 1}}]


def assert_graph_record(sink, run_id: uuid.UUID | None = None, answer: str = GROUNDED_ANSWER) -> None:
    [(record, [score])] = sink.emitted
    assert record.question == QUESTION
    assert record.contexts == [PARIS.page_content]
    assert record.answer == answer
    assert record.metadata["run_name"] == "LangGraph"
    assert record.metadata["documents"] == EXPECTED_DOCUMENTS
    if run_id is not None:
        assert (record.run_id, record.id) == (str(run_id), str(run_id))
    assert (score.metric, score.error) == ("lexical", None)
    if answer == GROUNDED_ANSWER:
        assert (score.value, score.hallucinated) == (1.0, False)
    else:  # the suffix's words are in no passage
        assert 0.0 < score.value < 1.0


def test_graph_invoke_reads_the_answer_from_the_state(handler, monitor, sink):
    run_id = uuid.uuid4()
    state = rag_graph().invoke({"question": QUESTION}, config={"callbacks": [handler], "run_id": run_id})

    assert state == {"question": QUESTION, "documents": [PARIS], "answer": GROUNDED_ANSWER}
    assert monitor.flush(10)
    assert_graph_record(sink, run_id)


def test_graph_ainvoke(handler, monitor, sink):
    run_id = uuid.uuid4()
    asyncio.run(rag_graph().ainvoke({"question": QUESTION}, config={"callbacks": [handler], "run_id": run_id}))
    assert monitor.flush(10)
    assert_graph_record(sink, run_id)


@pytest.mark.parametrize("stream_mode", ["updates", "values", "messages"])
def test_graph_stream_in_every_mode(handler, monitor, sink, stream_mode):
    chunks = list(rag_graph().stream({"question": QUESTION}, config={"callbacks": [handler]}, stream_mode=stream_mode))

    assert chunks
    assert monitor.flush(10)
    assert_graph_record(sink)


def test_graph_astream(handler, monitor, sink):
    async def consume() -> list:
        return [chunk async for chunk in rag_graph().astream({"question": QUESTION}, config={"callbacks": [handler]})]

    assert [list(update) for update in asyncio.run(consume())] == [["retrieve"], ["generate"]]
    assert monitor.flush(10)
    assert_graph_record(sink)


def test_graph_batch_and_abatch(handler, monitor, sink):
    graph = rag_graph()
    questions = ["What is the capital of France?", "Paris, capital of France?"]
    graph.batch([{"question": q} for q in questions], config={"callbacks": [handler]})
    asyncio.run(graph.abatch([{"question": q} for q in questions], config={"callbacks": [handler]}))

    assert monitor.flush(10)
    assert sorted(r.question for r in sink.records) == sorted(questions * 2)
    assert all(r.contexts == [PARIS.page_content] and r.answer == GROUNDED_ANSWER for r in sink.records)
    assert len({r.run_id for r in sink.records}) == 4


SUFFIX = " Source: France."


def test_answer_key_names_the_state_field_that_holds_the_answer(monitor, sink):
    graph = rag_graph(answer_field="final_reply", suffix=SUFFIX)
    handler = GroundtraceCallbackHandler(monitor=monitor, answer_key="final_reply")
    graph.invoke({"question": QUESTION}, config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert_graph_record(sink, answer=GROUNDED_ANSWER + SUFFIX)


def test_without_answer_key_an_unknown_state_field_falls_back_to_the_llm_generation(handler, monitor, sink):
    rag_graph(answer_field="final_reply", suffix=SUFFIX).invoke({"question": QUESTION}, config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert_graph_record(sink, answer=GROUNDED_ANSWER)
