"""Agents (llama_index.core.agent.workflow): one Record per user turn, whatever the loop of model and
tool calls: the user's message, the agent's final answer, and exactly what the model that wrote it
read: tool outputs (with the tool's name), or the documents a tool retrieved when those are what it
returned. Real agents, a scripted function-calling model, a real index and Monitor."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from agent_support import Call, HALLUCINATED, NODES_IN_TOOL, ScriptedAgentLLM, USER_MSG, clock_tool, search_tool, searching_agent
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor
from li_support import CONTEXTS, TOP_K, ScriptedLLM, assert_nothing_left
from llama_index.core.agent.workflow import AgentStream, AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.tools import FunctionTool, QueryEngineTool
from llama_index.core.memory import ChatMemoryBuffer

import groundtrace_llamaindex

# what the query engine inside the tool answers (grounded): the agent's final answer is not it
ENGINE_ANSWER = "According to SPbU, the dormitory fee is 1,879 rubles per month."


def assert_searched_once(monitor, sink, root: str) -> None:
    """One Record: the user's message, the agent's answer, the documents its search tool returned."""
    assert monitor.flush(10)
    [record] = sink.records
    assert record.id.startswith(f"{root}.run-")
    assert (record.question, record.answer, record.queries) == (USER_MSG, HALLUCINATED, ["dormitory fee"])
    assert (record.contexts, record.metadata) == (CONTEXTS, {"nodes": NODES_IN_TOOL})
    assert_nothing_left()


def run(agent, user_msg: str = USER_MSG, **kwargs):
    async def go():
        return await agent.run(user_msg=user_msg, **kwargs)

    return asyncio.run(go())


def engine_tool(index, engine_answer: str = ENGINE_ANSWER) -> QueryEngineTool:
    engine = index.as_query_engine(llm=ScriptedLLM(answer=engine_answer), similarity_top_k=TOP_K)
    return QueryEngineTool.from_defaults(engine, name="dorm_docs", description="The university's documents.")


def engine_agent(kind: str, tool: QueryEngineTool, reply: str):
    """An agent of ``kind`` whose model asks the query engine tool once, then replies."""
    if kind == "react":
        return ReActAgent(tools=[tool], streaming=False, llm=ScriptedAgentLLM([
            'Thought: I need the documents.\nAction: dorm_docs\nAction Input: {"input": "dormitory fee"}',
            f"Thought: I can answer without using any more tools.\nAnswer: {reply}"]))
    return FunctionAgent(tools=[tool], streaming=False,
                         llm=ScriptedAgentLLM([Call("dorm_docs", {"input": "dormitory fee"}), reply]))


def run_scored(agent, sink):
    """Run the agent with the facts metric; its one (record, score)."""
    with Monitor(metrics=["facts"], sinks=[sink], flush_at_exit=False) as monitor:
        groundtrace_llamaindex.instrument(monitor=monitor)
        try:
            run(agent)
            assert monitor.flush(30)
            assert_nothing_left()
        finally:
            groundtrace_llamaindex.uninstrument()
    [(record, [score])] = sink.rows
    return record, score


NODES_IN_ENGINE_TOOL = [{**node, "tool": "dorm_docs"} for node in NODES_IN_TOOL]


def engine_answer_set_aside(record) -> None:
    """The engine's answer (the tool's output) is kept beside the record as written by a model."""
    [aside] = record.metadata["unused_contexts"]
    assert (aside["kind"], aside["name"], aside["reason"]) == ("tool", "dorm_docs", "model-written")
    assert aside["id"].startswith("QueryEngineTool.")


@pytest.mark.parametrize("kind", ["function", "react"])
def test_an_agent_with_a_query_engine_tool_is_scored_against_the_nodes_the_engine_read(index, sink, kind):
    """The bug of issue 21: the record had the tool's input as question and the engine's answer as
    answer. And the engine's answer stands for the nodes its synthesis read (groundtrace.capture.turn)."""
    agent = engine_agent(kind, engine_tool(index), HALLUCINATED)

    record, score = run_scored(agent, sink)

    assert record.id.startswith(("FunctionAgent.run-", "ReActAgent.run-"))
    assert (record.question, record.answer, record.queries) == (USER_MSG, HALLUCINATED, ["dormitory fee"])
    assert (record.contexts, record.metadata["nodes"]) == (CONTEXTS, NODES_IN_ENGINE_TOOL)
    engine_answer_set_aside(record)
    # and the planted error is flagged (so is "SPbU", a name the nodes spell out in full)
    assert score.hallucinated and score.flagged_text() == '"SPbU"; "2,500 rubles"'


@pytest.mark.parametrize("kind", ["function", "react"])
def test_an_engine_hallucination_repeated_by_the_agent_is_caught(index, sink, kind):
    """The engine makes up a fee (2,500 rubles: in no node) and the agent repeats it faithfully.
    Measured against the engine's answer it would pass; measured against the nodes it is flagged."""
    made_up = "According to SPbU, the dormitory fee is 2,500 rubles per month."
    agent = engine_agent(kind, engine_tool(index, made_up), HALLUCINATED)

    record, score = run_scored(agent, sink)

    assert "2,500" not in " ".join(CONTEXTS)
    assert (record.contexts, record.answer) == (CONTEXTS, HALLUCINATED)
    engine_answer_set_aside(record)
    assert score.hallucinated and '"2,500 rubles"' in score.flagged_text().split("; ")
    # what the record said before the rule: the engine's answer as the context hides the error
    hidden = get_metric("facts").score(record.model_copy(update={"contexts": [made_up]}))
    assert '"2,500 rubles"' not in hidden.flagged_text().split("; ")


def test_a_sub_agent_called_as_a_tool_brings_the_nodes_it_read(index, instrumented, sink):
    """The same rule as the LangChain integration's supervisor: the research agent's reply (the
    tool's output) stands for the nodes its own search returned to it."""
    research = "Research says the dormitory fee is 1,879 rubles per month at SPbU."

    async def ask_researcher(question: str) -> str:
        """Ask the research agent about the university."""
        researcher = FunctionAgent(tools=[search_tool(index)], streaming=False,
                                   llm=ScriptedAgentLLM([Call("search_docs", {"query": "dormitory fee"}), research]))
        return str(await researcher.run(user_msg=question))

    boss = FunctionAgent(tools=[FunctionTool.from_defaults(async_fn=ask_researcher)], streaming=False,
                         llm=ScriptedAgentLLM([Call("ask_researcher", {"question": "dorm fee"}), HALLUCINATED]))

    assert str(run(boss)) == HALLUCINATED

    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.answer, record.queries) == (USER_MSG, HALLUCINATED, ["dorm fee", "dormitory fee"])
    assert record.contexts == CONTEXTS
    assert record.metadata["nodes"] == [{**node, "tool": "ask_researcher"} for node in NODES_IN_TOOL]
    [aside] = record.metadata["unused_contexts"]
    assert (aside["name"], aside["reason"]) == ("ask_researcher", "model-written")
    assert_nothing_left()


def test_function_agent_with_a_function_tool_that_retrieves_keeps_the_documents(index, instrumented, sink):
    agent = searching_agent(index)

    assert str(run(agent)) == HALLUCINATED

    # the tool returned the documents: they stand for its output
    assert_searched_once(instrumented, sink, "FunctionAgent")
    assert groundtrace_llamaindex.stats().recorded == 1


def test_a_tool_that_returns_directly_is_the_answer_and_its_documents_the_contexts(index, instrumented, sink):
    tool = search_tool(index)
    tool.metadata.return_direct = True  # the tool's output goes to the user as it is: no model writes it
    agent = FunctionAgent(tools=[tool], streaming=False, llm=ScriptedAgentLLM([Call("search_docs", {"query": "dormitory fee"})]))

    answer = str(run(agent))

    assert answer == "\n\n".join(CONTEXTS)
    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.answer, record.contexts) == (USER_MSG, answer, CONTEXTS)
    assert record.metadata == {"nodes": NODES_IN_TOOL}
    assert_nothing_left()


def test_react_agent_reads_its_observation(index, instrumented, sink):
    llm = ScriptedAgentLLM([
        'Thought: I need the documents.\nAction: search_docs\nAction Input: {"query": "dormitory fee"}',
        f"Thought: I can answer without using any more tools.\nAnswer: {HALLUCINATED}",
    ])
    agent = ReActAgent(tools=[search_tool(index)], llm=llm, streaming=False)

    assert str(run(agent)) == HALLUCINATED

    assert_searched_once(instrumented, sink, "ReActAgent")


def test_agent_workflow_with_a_handoff_is_one_turn_and_the_handoff_is_no_context(index, instrumented, sink):
    llm = ScriptedAgentLLM([Call("handoff", {"to_agent": "researcher", "reason": "needs the documents"}),
                            Call("search_docs", {"query": "dormitory fee"}), HALLUCINATED])
    front = FunctionAgent(name="front", description="Talks to students.", llm=llm, tools=[],
                          can_handoff_to=["researcher"], streaming=False)
    researcher = FunctionAgent(name="researcher", description="Searches the documents.", llm=llm,
                               tools=[search_tool(index)], streaming=False)
    workflow = AgentWorkflow(agents=[front, researcher], root_agent="front")

    assert str(run(workflow)) == HALLUCINATED

    assert llm.calls_made == 3
    assert_searched_once(instrumented, sink, "AgentWorkflow")


def test_a_streamed_agent_read_through_stream_events_gives_the_whole_answer(index, instrumented, sink):
    agent = searching_agent(index, streaming=True)

    async def go() -> tuple[list[str], str]:
        handler = agent.run(user_msg=USER_MSG)
        deltas = [event.delta async for event in handler.stream_events() if isinstance(event, AgentStream)]
        return deltas, str(await handler)

    deltas, answer = asyncio.run(go())

    assert answer == HALLUCINATED and "".join(deltas) == HALLUCINATED and len(deltas) > 1
    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.answer, record.contexts) == (USER_MSG, HALLUCINATED, CONTEXTS)
    assert_nothing_left()


def test_a_second_turn_reads_the_first_turns_tool_output_from_memory(index, instrumented, sink):
    follow_up = "And per year?"
    yearly = "That is 30,000 rubles a year."
    agent = searching_agent(index, HALLUCINATED, yearly)

    async def two_turns() -> None:
        memory = ChatMemoryBuffer.from_defaults()  # the conversation, kept across the two runs
        await agent.run(user_msg=USER_MSG, memory=memory)
        await agent.run(user_msg=follow_up, memory=memory)

    asyncio.run(two_turns())

    assert instrumented.flush(10)
    first, second = sink.records
    assert (first.question, first.answer, first.contexts) == (USER_MSG, HALLUCINATED, CONTEXTS)
    # turn 2 called no tool; its model read turn 1's tool message, kept in the agent's memory
    assert (second.question, second.answer, second.queries) == (follow_up, yearly, None)
    assert second.contexts == ["\n\n".join(CONTEXTS)]
    # and names the turn that called the tool (its Record's id)
    assert second.metadata == {"nodes": [{"tool": "search_docs", "id": "call-0", "turn": first.id}]}
    assert_nothing_left()


@pytest.mark.parametrize(("options", "contexts", "tools"), [
    ({"exclude_tools": ["clock"]}, CONTEXTS, ["search_docs", "search_docs"]),
    ({"include_tools": ["clock"]}, ["Today is Monday, the 2nd of March 2026."], ["clock"]),
    ({}, [*CONTEXTS, "Today is Monday, the 2nd of March 2026."], ["search_docs", "search_docs", "clock"]),
], ids=["exclude", "include", "all"])
def test_tool_outputs_are_filtered_by_tool_name(index, monitor, sink, options, contexts, tools):
    agent = FunctionAgent(tools=[search_tool(index), clock_tool()], streaming=False, llm=ScriptedAgentLLM(
        [Call("search_docs", {"query": "dormitory fee"}), Call("clock"), HALLUCINATED]))
    groundtrace_llamaindex.instrument(monitor=monitor, **options)
    try:
        run(agent)
        assert monitor.flush(10)
    finally:
        groundtrace_llamaindex.uninstrument()

    [record] = sink.records
    assert record.contexts == contexts
    assert [origin["tool"] for origin in record.metadata["nodes"]] == tools
    unused = record.metadata.get("unused_contexts", [])
    assert {u.get("name", u["id"]) for u in unused} == (
        {"clock"} if "exclude_tools" in options else {"search_docs", "dorm-en#0", "dorm-ru#0"} if options else set())


def test_tool_options_must_be_lists_of_names(monitor):
    with pytest.raises(TypeError, match="exclude_tools must be a list of tool names"):
        groundtrace_llamaindex.instrument(monitor=monitor, exclude_tools="clock")
    assert not groundtrace_llamaindex.is_instrumented()


def test_an_excluded_agent_run_is_counted_not_scored(index, instrumented, sink):
    agent = searching_agent(index)

    async def go() -> None:
        with groundtrace_llamaindex.exclude():
            handler = agent.run(user_msg=USER_MSG)  # the run's task starts here, in this context
        await handler

    asyncio.run(go())

    assert instrumented.flush(10)
    assert (instrumented.stats.excluded, sink.rows) == (1, [])
    assert groundtrace_llamaindex.stats().excluded == 1


def test_agents_run_in_threads_at_once_each_make_their_own_record(index, instrumented, sink):
    questions = [f"Question {i}: what does the dormitory cost?" for i in range(8)]

    def ask(question: str) -> str:
        llm = ScriptedAgentLLM([Call("search_docs", {"query": f"fee for {question[:10]}"}), f"Answer to {question}"])
        return str(run(FunctionAgent(tools=[search_tool(index)], llm=llm, streaming=True), question))

    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        answers = list(pool.map(ask, questions))

    assert answers == [f"Answer to {question}" for question in questions]
    assert instrumented.flush(10)
    records = sorted(sink.records, key=lambda record: questions.index(record.question))
    assert [(r.question, r.answer, r.queries, r.contexts) for r in records] == [
        (q, f"Answer to {q}", [f"fee for {q[:10]}"], CONTEXTS) for q in questions]
    assert_nothing_left()
