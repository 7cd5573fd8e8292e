"""Turns that make no Record say why: once per reason at INFO level (groundtrace.capture.kit), and
counted per reason in groundtrace_llamaindex.stats(); roots that are no one's turn (index building,
bare embedding or LLM calls) are counted apart and say nothing."""

from __future__ import annotations

import asyncio
import logging

import pytest
from agent_support import USER_MSG, ScriptedAgentLLM, searching_agent
from li_support import QUESTION, TOP_K, ScriptedLLM, assert_nothing_left, build_index
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

import groundtrace_llamaindex


class SearchByTopic(Workflow):
    """Retrieves for a ``topic`` (no user message named in its StartEvent) and returns a dict with
    no text under any key groundtrace reads."""

    def __init__(self, index) -> None:
        super().__init__(timeout=30)
        self.retriever = index.as_retriever(similarity_top_k=TOP_K)

    @step
    async def search(self, ev: StartEvent) -> StopEvent:
        nodes = await self.retriever.aretrieve(ev.topic)
        return StopEvent(result={"hits": len(nodes)})


def messages(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records
            if r.name == "groundtrace.capture" and "made no record" in r.getMessage()]


def test_each_reason_is_said_once_and_counted_every_time(index, instrumented, sink, caplog):
    chatty = FunctionAgent(tools=[], streaming=False, llm=ScriptedAgentLLM(["Hello!", "Hello again!"]))

    async def turns() -> None:
        await chatty.run(user_msg="Hi")  # no retrieval and no tool output: nothing to score
        await chatty.run(user_msg="Hi again")
        await SearchByTopic(index).run(topic="dormitory")  # a retrieval, no question, no text result

    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        asyncio.run(turns())
        with pytest.raises(RuntimeError, match="the LLM is down"):
            index.as_query_engine(llm=ScriptedLLM(fail="call"), similarity_top_k=TOP_K).query(QUESTION)
        build_index()  # embeddings and node parsing: roots, but no one's turn
        ScriptedLLM().complete("Say something")  # a model called by hand: said, with the fix

    assert instrumented.flush(10)
    assert sink.rows == []
    assert [(level, text) for level, text in messages(caplog)] == [
        ("WARNING", "groundtrace: a LlamaIndex turn made no record: no retrieval and no tool output; no retriever, "
         "tool or prompt variable held its contexts: if it answered from text retrieved by your own code, decorate "
         "your retrieval function with @groundtrace.retrieval (docs: troubleshooting, 'I see no scores') "
         "(said once; counted in stats())"),
        ("INFO", "groundtrace: a LlamaIndex turn made no record: no question; its input names no user message "
         "(docs: Integrations, LlamaIndex, 'What is captured') (said once; counted in stats())"),
        ("INFO", "groundtrace: a LlamaIndex turn made no record: the root raised; its answer is not scored "
         "(said once; counted in stats())"),
        ("WARNING", "groundtrace: a LlamaIndex turn made no record: a model call with no engine, agent or workflow "
         "around it; if it answered from text your code retrieved (a vector store queried by hand), decorate your "
         "retrieval function with @groundtrace.retrieval (docs: troubleshooting, 'I see no scores'); if it is no "
         "RAG answer, nothing is missing (said once; counted in stats())"),
    ]
    stats = groundtrace_llamaindex.stats()
    assert stats.no_record == {"no retrieval and no tool output": 2, "no question": 1,
                               "a model call with no engine, agent or workflow around it": 1}
    # the Monitor counts the same turns, for its exit summary
    assert instrumented.stats.no_record == 4
    assert (stats.recorded, stats.failed, stats.evicted, stats.in_flight) == (0, 1, 0, 0) and stats.not_turns > 0
    assert stats.roots == stats.recorded + sum(stats.no_record.values()) + stats.failed + stats.evicted \
        + stats.not_turns + stats.in_flight
    assert_nothing_left()


def test_a_workflow_whose_result_is_no_text_is_counted(index, instrumented):
    class AnswerAsADict(SearchByTopic):
        @step
        async def search(self, ev: StartEvent) -> StopEvent:
            nodes = await self.retriever.aretrieve(ev.query)
            return StopEvent(result={"hits": len(nodes)})

    async def go() -> dict:
        return await AnswerAsADict(index).run(query=QUESTION)

    assert asyncio.run(go()) == {"hits": 2}
    assert groundtrace_llamaindex.stats().no_record == {"no answer": 1}


def test_stats_are_zero_when_not_instrumented_and_count_a_recorded_turn(index, monitor):
    assert groundtrace_llamaindex.stats() == groundtrace_llamaindex.CaptureStats()
    agent = searching_agent(index, "It is 1,879 rubles.")
    groundtrace_llamaindex.instrument(monitor=monitor)
    try:
        async def go() -> None:
            await agent.run(user_msg=USER_MSG)

        asyncio.run(go())
        stats = groundtrace_llamaindex.stats()
    finally:
        groundtrace_llamaindex.uninstrument()
    assert (stats.roots, stats.recorded, stats.no_record, stats.not_turns) == (1, 1, {}, 0)
