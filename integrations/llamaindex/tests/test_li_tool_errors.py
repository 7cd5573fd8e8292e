"""A failing tool is never a context (issue 30): the error output an agent's model reads in place of
the tool's result is set aside as "tool error" and counted in metadata["tool_errors"], whether the
tool raised (the agent wrote the error output), returned an is_error output, or failed in an
earlier turn whose messages the agent's memory hands on. And a tool whose raw output is nodes has
those nodes as its contexts. Real agents, a scripted function-calling model, a real index."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import Call, HALLUCINATED, NODES_IN_TOOL, ScriptedAgentLLM, USER_MSG, search_tool
from li_support import CONTEXTS, assert_nothing_left
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import FunctionTool, ToolOutput

OUTAGE = "Ticket office API unavailable (HTTP 503)"
SORRY = "The ticket office is down, but the dormitory costs 2,500 rubles a month."


def tickets_tool() -> FunctionTool:
    def tickets(city: str) -> str:
        """Buy train tickets."""
        raise RuntimeError(OUTAGE)

    return FunctionTool.from_defaults(tickets)


def run(agent, user_msg: str = USER_MSG, **kwargs):
    async def go():
        return await agent.run(user_msg=user_msg, **kwargs)

    return asyncio.run(go())


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    assert_nothing_left()
    return record


def function_agent(index, llm) -> FunctionAgent:
    return FunctionAgent(tools=[search_tool(index), tickets_tool()], streaming=False, llm=llm)


def react_agent(index, llm) -> ReActAgent:
    return ReActAgent(tools=[search_tool(index), tickets_tool()], streaming=False, llm=llm)


def workflow(index, llm) -> AgentWorkflow:
    return AgentWorkflow(agents=[function_agent(index, llm)], root_agent="Agent")


FUNCTION_SCRIPT = [Call("search_docs", {"query": "dormitory fee"}), Call("tickets", {"city": "Kazan"}), SORRY]
REACT_SCRIPT = [
    'Thought: I need the documents.\nAction: search_docs\nAction Input: {"query": "dormitory fee"}',
    'Thought: Now the tickets.\nAction: tickets\nAction Input: {"city": "Kazan"}',
    f"Thought: I can answer without using any more tools.\nAnswer: {SORRY}",
]


@pytest.mark.parametrize(("build", "script", "root"), [
    (function_agent, FUNCTION_SCRIPT, "FunctionAgent"),
    (react_agent, REACT_SCRIPT, "ReActAgent"),
    (workflow, FUNCTION_SCRIPT, "AgentWorkflow"),
], ids=["function", "react", "workflow"])
def test_a_tool_that_raises_is_set_aside_and_counted_never_a_context(index, instrumented, sink, build, script, root):
    llm = ScriptedAgentLLM(list(script))

    assert str(run(build(index, llm))) == SORRY

    assert llm.calls_made == 3
    record = only_record(instrumented, sink)
    assert record.id.startswith(f"{root}.run-")
    assert (record.question, record.answer, record.queries) == (USER_MSG, SORRY, ["dormitory fee", "Kazan"])
    # only the good tool's documents: the outage message the model read is no source of the answer
    assert (record.contexts, record.metadata["nodes"]) == (CONTEXTS, NODES_IN_TOOL)
    assert OUTAGE not in record.contexts
    [aside] = record.metadata["unused_contexts"]
    assert (aside["kind"], aside["name"], aside["reason"]) == ("tool", "tickets", "tool error")
    if root != "ReActAgent":  # a function-calling model's call id; ReAct makes its own
        assert aside["id"] == "call-1"
    assert record.metadata["tool_errors"] == {"count": 1, "tools": ["tickets"]}


def test_a_turn_whose_only_tool_failed_has_no_context_and_says_why(index, instrumented, sink):
    """Before, the outage message was the one context: the answer was scored against it."""
    llm = ScriptedAgentLLM([Call("tickets", {"city": "Kazan"}), Call("tickets", {"city": "Moscow"}), SORRY])
    agent = FunctionAgent(tools=[tickets_tool()], streaming=False, llm=llm)

    run(agent)

    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (USER_MSG, SORRY, [])
    assert record.metadata == {
        "nodes": [],
        "unused_contexts": [{"kind": "tool", "name": "tickets", "id": "call-0", "reason": "tool error"},
                            {"kind": "tool", "name": "tickets", "id": "call-1", "reason": "tool error"}],
        "tool_errors": {"count": 2, "tools": ["tickets"]},
    }


def test_an_is_error_output_a_tool_returns_is_one_error(index, instrumented, sink):
    """The tool does not raise: it returns ToolOutput(is_error=True), seen at the tool's own span and
    again in the agent's ToolCallResult: one failed call, not two, and never a context."""

    def refuse(output) -> ToolOutput:
        return ToolOutput(content=OUTAGE, tool_name="tickets", raw_input={}, raw_output=None, is_error=True)

    def tickets(city: str) -> str:
        """Buy train tickets."""
        return "no tickets"

    tool = FunctionTool.from_defaults(tickets, callback=refuse)
    llm = ScriptedAgentLLM([Call("search_docs", {"query": "dormitory fee"}), Call("tickets", {"city": "Kazan"}),
                            HALLUCINATED])
    agent = FunctionAgent(tools=[search_tool(index), tool], streaming=False, llm=llm)

    run(agent)

    record = only_record(instrumented, sink)
    assert (record.answer, record.contexts) == (HALLUCINATED, CONTEXTS)
    [aside] = record.metadata["unused_contexts"]
    assert (aside["name"], aside["reason"]) == ("tickets", "tool error")
    assert aside["id"].startswith("FunctionTool.acall-")  # the tool's own span said it first
    assert record.metadata["tool_errors"] == {"count": 1, "tools": ["tickets"]}


def test_an_earlier_turns_failed_call_read_from_memory_is_set_aside(index, instrumented, sink):
    """LlamaIndex keeps only the text and the call id of a tool message in memory: the turn that ran
    the call was told it failed, and the next turn, whose model reads the message, sets it aside.
    It is no failure of the second turn's own: tool_errors counts only the turn's calls."""
    follow_up = "And the tickets?"
    llm = ScriptedAgentLLM([Call("search_docs", {"query": "dormitory fee"}), Call("tickets", {"city": "Kazan"}),
                            SORRY, "Still no tickets, the dormitory is 1,879 rubles."])
    agent = function_agent(index, llm)

    async def two_turns() -> None:
        memory = ChatMemoryBuffer.from_defaults()
        await agent.run(user_msg=USER_MSG, memory=memory)
        await agent.run(user_msg=follow_up, memory=memory)

    asyncio.run(two_turns())

    assert instrumented.flush(10)
    first, second = sink.records
    assert first.metadata["tool_errors"] == {"count": 1, "tools": ["tickets"]}
    assert (second.question, second.contexts) == (follow_up, ["\n\n".join(CONTEXTS)])
    assert second.metadata == {
        "nodes": [{"tool": "search_docs", "id": "call-0", "turn": first.id}],
        "unused_contexts": [{"kind": "tool", "name": "tickets", "id": "call-1", "reason": "tool error"}],
    }
    assert_nothing_left()


LONG = ("The dormitory fee at Saint Petersburg State University is 1,879 rubles per month. " * 6).strip()
ARTIFACTS = [TextNode(id_="fees#1", text=LONG, metadata={"source": "spbu.ru/fees"}),
             TextNode(id_="fees#2", text="Payment is due by the 10th of each month.", metadata={"source": "spbu.ru/pay"})]


@pytest.mark.parametrize("shape", ["nodes", "scored", "one"])
def test_a_tool_that_returns_nodes_has_them_as_contexts(index, instrumented, sink, shape):
    """The model reads the nodes' serialization (LlamaIndex cuts each to 350 characters); the
    contexts are the nodes themselves, one each, with their ids and metadata."""
    wanted = ARTIFACTS[:1] if shape == "one" else ARTIFACTS

    def fee_docs(query: str) -> object:
        """The fee documents."""
        if shape == "one":
            return NodeWithScore(node=ARTIFACTS[0], score=0.9)
        return [NodeWithScore(node=node, score=0.9) for node in ARTIFACTS] if shape == "scored" else list(ARTIFACTS)

    llm = ScriptedAgentLLM([Call("fee_docs", {"query": "fees"}), HALLUCINATED])
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(fee_docs)], streaming=False, llm=llm)

    run(agent)

    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.queries) == (USER_MSG, HALLUCINATED, ["fees"])
    assert record.contexts == [node.text for node in wanted]
    score = None if shape == "nodes" else pytest.approx(0.9)
    assert record.metadata == {"nodes": [{"id": node.id_, "score": score, "metadata": node.metadata, "tool": "fee_docs"}
                                         for node in wanted]}


def test_a_tool_that_returns_text_keeps_its_text(index, instrumented, sink):
    def fee_text(query: str) -> str:
        """The fee, as text."""
        return LONG

    llm = ScriptedAgentLLM([Call("fee_text", {"query": "fees"}), HALLUCINATED])
    run(FunctionAgent(tools=[FunctionTool.from_defaults(fee_text)], streaming=False, llm=llm))

    record = only_record(instrumented, sink)
    assert record.contexts == [LONG]
    [origin] = record.metadata["nodes"]
    assert origin["tool"] == "fee_text" and origin["id"].startswith("FunctionTool.acall-")

