"""Streaming query engines: the root span ends before the LLM has even been called, so a Record is
submitted only once the caller has read the stream to its end; a stream read in part or broken
is not scored and leaves nothing behind."""

from __future__ import annotations

import asyncio

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
    stream_tokens,
)
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

import groundtrace_llamaindex


def streaming_engine(index, llm=None):
    return index.as_query_engine(llm=llm or ScriptedLLM(), similarity_top_k=TOP_K, streaming=True)


def test_nothing_is_submitted_until_the_stream_is_read_then_exactly_one_record(index, instrumented, sink):
    response = streaming_engine(index).query(QUESTION)

    assert isinstance(response, StreamingResponse)
    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    # the root span has ended, but its turn is in flight until the stream is read
    assert (groundtrace_llamaindex.stats().in_flight, groundtrace_llamaindex.stats().recorded) == (1, 0)
    assert list(response.response_gen) == stream_tokens()  # the caller gets every token, unchanged
    assert instrumented.flush(10)
    assert (groundtrace_llamaindex.stats().in_flight, groundtrace_llamaindex.stats().recorded) == (0, 1)
    [record] = sink.records
    assert record.id.startswith("RetrieverQueryEngine.query-")
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert record.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert instrumented.stats.submitted == 1
    assert_nothing_left()


def test_a_stream_read_through_get_response_is_scored_once(index, instrumented, sink):
    response = streaming_engine(index).query(QUESTION)

    assert response.get_response().response == ANSWER
    assert str(response) == ANSWER  # read again from LlamaIndex's own copy: no second record

    assert instrumented.flush(10)
    assert [record.answer for record in sink.records] == [ANSWER]


def test_a_stream_read_in_part_is_not_scored(index, instrumented, sink):
    response = streaming_engine(index).query(QUESTION)
    tokens = response.response_gen

    assert next(tokens) == stream_tokens()[0]
    tokens.close()

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    stats = groundtrace_llamaindex.stats()
    assert (stats.in_flight, stats.no_record) == (0, {"its stream raised or was not read to the end": 1})
    assert_nothing_left()


def test_a_stream_that_breaks_is_not_scored_and_the_next_request_is_whole(index, instrumented, sink):
    response = streaming_engine(index, ScriptedLLM(fail="stream")).query(QUESTION)

    with pytest.raises(RuntimeError, match="the stream broke"):
        list(response.response_gen)

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert_nothing_left()
    assert "".join(streaming_engine(index).query(QUESTION).response_gen) == ANSWER
    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)


def test_async_streaming_query(index, instrumented, sink):
    async def ask() -> list[str]:
        response = await streaming_engine(index).aquery(QUESTION)
        assert isinstance(response, AsyncStreamingResponse)
        assert instrumented.flush(10)
        assert instrumented.stats.submitted == 0
        return [token async for token in response.async_response_gen()]

    assert asyncio.run(ask()) == stream_tokens()
    assert_the_record(instrumented, sink, "RetrieverQueryEngine.aquery")
