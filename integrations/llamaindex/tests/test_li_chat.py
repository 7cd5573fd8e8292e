"""Chat engines emit no query events: the question is the chat message, and a Record is submitted
when the root span ends, or, for stream_chat / astream_chat, when LlamaIndex's writer has read the
LLM stream to its end."""

from __future__ import annotations

import asyncio
import threading

import pytest
from li_support import (
    ANSWER,
    CONTEXTS,
    QUESTION,
    TOP_K,
    ScriptedLLM,
    assert_nothing_left,
    assert_the_record,
    expected_nodes,
    our_span_handler,
)


def chat_engine(index, llm=None):
    return index.as_chat_engine(chat_mode="context", llm=llm or ScriptedLLM(), similarity_top_k=TOP_K)


def test_chat_gives_one_record_per_message(index, instrumented, sink):
    engine = chat_engine(index)

    assert engine.chat(QUESTION).response == ANSWER
    assert engine.chat("А в рублях за год?").response == ANSWER

    assert instrumented.flush(10)
    first, second = sink.records
    assert first.id.startswith("ContextChatEngine.chat-")
    assert (first.question, first.contexts, first.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert first.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert (second.question, second.contexts, second.answer) == ("А в рублях за год?", CONTEXTS, ANSWER)
    assert_nothing_left()


@pytest.mark.parametrize("mode", ["context", "condense_plus_context", "condense_question"])
def test_every_retrieval_chat_mode_gives_exact_records_for_chat_and_stream_chat(index, instrumented, sink, mode):
    engine = index.as_chat_engine(chat_mode=mode, llm=ScriptedLLM(), similarity_top_k=TOP_K)

    engine.chat(QUESTION)
    assert "".join(engine.stream_chat("А в рублях за год?").response_gen) == ANSWER

    assert instrumented.flush(10)
    assert [(r.question, r.contexts, r.answer) for r in sink.records] == [
        (QUESTION, CONTEXTS, ANSWER), ("А в рублях за год?", CONTEXTS, ANSWER)]
    assert all(r.metadata == {"nodes": expected_nodes(pytest.approx(1.0))} for r in sink.records)
    assert_nothing_left()


def test_achat(index, instrumented, sink):
    assert asyncio.run(chat_engine(index).achat(QUESTION)).response == ANSWER

    assert instrumented.flush(10)
    [record] = sink.records
    assert record.id.startswith("ContextChatEngine.achat-")
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert_nothing_left()


def test_stream_chat_is_submitted_when_the_stream_ends(index, instrumented, sink):
    gate = threading.Event()  # holds the LLM stream after its first token
    response = chat_engine(index, ScriptedLLM(gate=gate)).stream_chat(QUESTION)

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert our_span_handler().tracker.open_roots == 1  # waiting for the writer
    gate.set()
    assert "".join(response.response_gen) == ANSWER  # it joins LlamaIndex's writer thread at the end

    assert_the_record(instrumented, sink, "ContextChatEngine.stream_chat")


def test_astream_chat(index, instrumented, sink):
    async def chat() -> str:
        response = await chat_engine(index).astream_chat(QUESTION)
        return "".join([token async for token in response.async_response_gen()])  # awaits the writer task

    assert asyncio.run(chat()) == ANSWER

    assert instrumented.flush(10)
    [record] = sink.records
    assert record.id.startswith("ContextChatEngine.astream_chat-")
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert_nothing_left()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_chat_stream_that_breaks_is_not_scored(index, instrumented, sink):
    response = chat_engine(index, ScriptedLLM(fail="stream")).stream_chat(QUESTION)

    with pytest.raises(RuntimeError, match="the stream broke"):
        "".join(response.response_gen)

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert_nothing_left()
