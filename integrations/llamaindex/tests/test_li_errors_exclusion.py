"""A root that raises is not scored and leaves no state; excluded calls are counted, not scored."""

from __future__ import annotations

import asyncio

import pytest
from groundtrace.record import realize
from li_support import ANSWER, CONTEXTS, QUESTION, TOP_K, ScriptedLLM, assert_nothing_left, expected_nodes
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever

import groundtrace_llamaindex


class UnreachableRetriever(BaseRetriever):
    def _retrieve(self, query_bundle):
        raise ConnectionError("the vector store is unreachable")


def test_a_query_whose_llm_raises_is_not_scored_and_the_next_one_is_whole(index, instrumented, sink):
    failing = index.as_query_engine(llm=ScriptedLLM(fail="call"), similarity_top_k=TOP_K)

    with pytest.raises(RuntimeError, match="the LLM is down"):
        failing.query(QUESTION)

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert_nothing_left()
    index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K).query("Сколько стоит общежитие?")
    assert instrumented.flush(10)
    [record] = sink.records  # nothing of the failed request leaks into it
    assert (record.question, record.contexts, record.answer) == ("Сколько стоит общежитие?", CONTEXTS, ANSWER)
    assert record.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}


def test_a_query_whose_retriever_raises_is_not_scored(instrumented, sink):
    engine = RetrieverQueryEngine.from_args(UnreachableRetriever(), llm=ScriptedLLM())

    with pytest.raises(ConnectionError):
        engine.query(QUESTION)
    with pytest.raises(ConnectionError):
        asyncio.run(engine.aquery(QUESTION))

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert_nothing_left()


def test_a_chat_whose_llm_raises_is_not_scored(index, instrumented, sink):
    engine = index.as_chat_engine(chat_mode="context", llm=ScriptedLLM(fail="call"), similarity_top_k=TOP_K)

    with pytest.raises(RuntimeError, match="the LLM is down"):
        engine.chat(QUESTION)

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert_nothing_left()


def spy_on_submit(monitor, monkeypatch) -> list:
    """The Records handed to the Monitor, as they are built (the integration hands over a
    PendingRecord, which the Monitor's worker builds: realize() builds it here instead)."""
    submitted = []
    submit = monitor.submit

    def spy(record, **options):
        submitted.append(realize(record))
        return submit(submitted[-1], **options)

    monkeypatch.setattr(monitor, "submit", spy)
    return submitted


def test_exclude_keeps_a_call_out_of_scoring_and_the_monitor_counts_it(index, instrumented, sink, monkeypatch):
    submitted = spy_on_submit(instrumented, monkeypatch)
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    with groundtrace_llamaindex.exclude():
        engine.query(QUESTION)
    engine.query(QUESTION)

    assert instrumented.flush(10)
    excluded, kept = submitted
    assert excluded.metadata == {"nodes": expected_nodes(pytest.approx(1.0)), "groundtrace_exclude": True}
    assert (excluded.question, excluded.answer, excluded.trace_id) == (QUESTION, ANSWER, None)
    assert kept.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert sink.records == [kept]
    stats = instrumented.stats
    assert (stats.submitted, stats.excluded, stats.scored) == (2, 1, 1)
    assert_nothing_left()


def test_llamaindex_instrument_tags_exclude_too(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    with instrument_tags({"groundtrace_exclude": True}):
        engine.query(QUESTION)

    assert instrumented.flush(10)
    assert (instrumented.stats.excluded, instrumented.stats.scored, sink.rows) == (1, 0, [])
