"""A failing tool is never a context (issue 30): a ToolException the tool handles itself
(``handle_tool_error=True``), an exception that LangGraph's ToolNode (``handle_tool_errors=True``) or
langchain's ToolErrorMiddleware turns into an error message, and a call the tool node refuses before
any tool runs (bad arguments). Each is told by what the framework says of it (an on_tool_error event,
ToolMessage.status == "error"), set aside with the reason "tool error", and counted in
metadata["tool_errors"]; the good tools' outputs stay the contexts."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from lc_agents import PRICES, ScriptedChatModel, call, call_id, lookup_prices, tool_origin, user

QUESTION = "How much is an adult ticket if I buy it online?"
ANSWER = "An adult ticket costs 20 euros online."
OUTAGE = "The archive search is down: the database did not answer in time."


@tool
def search_archive(query: str) -> str:
    """Search the museum's archive (it is down)."""
    raise ValueError(OUTAGE)


@tool
def search_catalogue(query: str) -> str:
    """Search the museum's catalogue (it reports its own failure)."""
    raise ToolException(OUTAGE)


search_catalogue.handle_tool_error = True


def tool_node(*tools):
    from langgraph.prebuilt import ToolNode

    return ToolNode(list(tools), handle_tool_errors=True)


def react_agent(model, tools):
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0, still shipped and used
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools=tool_node(*tools))


def agent_with_middleware(model, tools):
    return create_agent(model, tools=tools, middleware=[ToolErrorMiddleware(lambda error, request: f"error: {error}")])


def agent_with_handled_tool(model, tools):
    return create_agent(model, tools=tools)


# (the failing tool, the app that runs it): each shape the frameworks have for a tool that fails
SHAPES = pytest.mark.parametrize(("failing", "factory"), [
    ("search_catalogue", agent_with_handled_tool),
    ("search_archive", agent_with_middleware),
    ("search_archive", react_agent),
], ids=["ToolException-handle_tool_error", "ToolErrorMiddleware", "ToolNode-handle_tool_errors"])
TOOLS = {"search_archive": search_archive, "search_catalogue": search_catalogue}


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


@SHAPES
def test_a_failed_tool_call_is_set_aside_and_counted_and_the_good_tool_is_the_context(failing, factory, handler,
                                                                                   monitor, sink, capture_delta):
    broken, lookup = call(failing, query="adult ticket"), call("lookup_prices", query="adult online")
    model = ScriptedChatModel(replies=[broken, lookup, AIMessage(ANSWER)])
    factory(model, [TOOLS[failing], lookup_prices]).invoke(user(QUESTION), config={"callbacks": [handler]})

    # the error message reached the final call, as the framework's own error message
    [error_message, good] = [m for m in model.inputs[-1] if isinstance(m, ToolMessage)]
    assert (error_message.status, error_message.tool_call_id, good.status) == ("error", call_id(broken), "success")
    assert OUTAGE in str(error_message.content)
    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.queries) == (QUESTION, ANSWER, ["adult ticket", "adult online"])
    assert record.contexts == [PRICES["adult"]]
    assert record.metadata["documents"] == [tool_origin("lookup_prices", call_id(lookup))]
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": failing, "id": call_id(broken),
                                                   "reason": "tool error"}]
    assert record.metadata["tool_errors"] == {"count": 1, "tools": [failing]}
    assert capture_delta() == {"roots": 1, "recorded": 1}


@SHAPES
def test_a_turn_whose_only_tool_failed_is_recorded_with_no_context(failing, factory, handler, monitor, sink):
    broken = call(failing, query="adult ticket")
    sorry = "Sorry, I cannot look that up right now."
    factory(ScriptedChatModel(replies=[broken, AIMessage(sorry)]), [TOOLS[failing]]).invoke(
        user(QUESTION), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, sorry, [])
    assert record.metadata["documents"] == []
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": failing, "id": call_id(broken),
                                                   "reason": "tool error"}]
    assert record.metadata["tool_errors"] == {"count": 1, "tools": [failing]}


def test_a_call_refused_before_any_tool_ran_is_a_tool_error(handler, monitor, sink):
    # no 'query' argument: the tool node answers with an error message and runs no tool (no tool event at all)
    bad, lookup = call("lookup_prices", wrong="adult"), call("lookup_prices", query="adult online")
    model = ScriptedChatModel(replies=[bad, lookup, AIMessage(ANSWER)])
    react_agent(model, [lookup_prices]).invoke(user(QUESTION), config={"callbacks": [handler]})

    [refused, _] = [m for m in model.inputs[-1] if isinstance(m, ToolMessage)]
    assert (refused.status, refused.tool_call_id) == ("error", call_id(bad))
    record = only_record(monitor, sink)
    assert record.contexts == [PRICES["adult"]]
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": "lookup_prices", "id": call_id(bad),
                                                   "reason": "tool error"}]
    assert record.metadata["tool_errors"] == {"count": 1, "tools": ["lookup_prices"]}


def test_an_earlier_turns_tool_error_is_neither_a_context_nor_this_turns_error(handler, monitor, sink):
    broken, lookup = call("search_archive", query="adult ticket"), call("lookup_prices", query="adult online")
    second = "Students pay half price on weekdays."
    model = ScriptedChatModel(replies=[broken, lookup, AIMessage(ANSWER), AIMessage(second)])
    agent = create_agent(model, tools=[search_archive, lookup_prices], checkpointer=InMemorySaver(),
                         middleware=[ToolErrorMiddleware(lambda error, request: f"error: {error}")])
    config = {"callbacks": [handler], "configurable": {"thread_id": "visitor-2"}}
    agent.invoke(user(QUESTION), config=config)
    agent.invoke(user("And students?"), config=config)

    assert monitor.flush(10)
    turn_1, turn_2 = sink.records
    assert turn_1.metadata["tool_errors"] == {"count": 1, "tools": ["search_archive"]}
    # turn 2 read the whole thread, turn 1's error message with it: not a context, and not turn 2's failure
    assert any(isinstance(m, ToolMessage) and m.status == "error" for m in model.inputs[-1])
    assert (turn_2.question, turn_2.answer, turn_2.contexts) == ("And students?", second, [PRICES["adult"]])
    assert "tool_errors" not in turn_2.metadata
    assert "unused_contexts" not in turn_2.metadata


@pytest.mark.parametrize("mode", ["ainvoke", "stream"])
def test_a_failed_tool_call_is_set_aside_in_async_and_streamed_runs(handler, monitor, sink, mode):
    broken, lookup = call("search_archive", query="adult ticket"), call("lookup_prices", query="adult online")
    agent = agent_with_middleware(ScriptedChatModel(replies=[broken, lookup, AIMessage(ANSWER)]),
                                  [search_archive, lookup_prices])
    config = {"callbacks": [handler]}
    if mode == "ainvoke":
        asyncio.run(agent.ainvoke(user(QUESTION), config=config))
    else:
        assert list(agent.stream(user(QUESTION), config=config, stream_mode="messages"))

    record = only_record(monitor, sink)
    assert (record.answer, record.contexts) == (ANSWER, [PRICES["adult"]])
    assert record.metadata["tool_errors"] == {"count": 1, "tools": ["search_archive"]}
