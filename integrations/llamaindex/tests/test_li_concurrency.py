"""Concurrent requests never mix: each thread or asyncio task is a root of its own."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from li_support import CONTEXTS, TOP_K, ScriptedLLM, assert_nothing_left, expected_nodes

QUESTIONS = [f"Вопрос {i}: сколько стоит общежитие?" for i in range(20)]


@pytest.mark.parametrize("streaming", [False, True], ids=["query", "streaming-query"])
def test_twenty_queries_in_threads_at_once_each_get_their_own_record(index, instrumented, sink, streaming):
    # every LLM call waits at the barrier: all twenty requests are in flight at the same moment
    llm = ScriptedLLM(echo_query=True, barrier=threading.Barrier(len(QUESTIONS)))
    engine = index.as_query_engine(llm=llm, similarity_top_k=TOP_K, streaming=streaming)

    def ask(question: str) -> str:
        response = engine.query(question)
        return "".join(response.response_gen) if streaming else str(response)

    with ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
        answers = list(pool.map(ask, QUESTIONS))

    assert answers == [f"Answer to: {q}" for q in QUESTIONS]
    assert instrumented.flush(10)
    records = sorted(sink.records, key=lambda record: QUESTIONS.index(record.question))
    expected = [(q, f"Answer to: {q}", CONTEXTS) for q in QUESTIONS]
    assert [(r.question, r.answer, r.contexts) for r in records] == expected
    assert all(r.metadata == {"nodes": expected_nodes(pytest.approx(1.0))} for r in records)
    assert len({r.id for r in records}) == len(QUESTIONS)
    assert_nothing_left()


def test_concurrent_aqueries_in_one_event_loop_do_not_mix(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(echo_query=True), similarity_top_k=TOP_K)

    async def ask_all() -> list[str]:
        return [str(r) for r in await asyncio.gather(*(engine.aquery(q) for q in QUESTIONS))]

    assert asyncio.run(ask_all()) == [f"Answer to: {q}" for q in QUESTIONS]
    assert instrumented.flush(10)
    assert sorted((r.question, r.answer) for r in sink.records) == sorted((q, f"Answer to: {q}") for q in QUESTIONS)
    assert_nothing_left()
