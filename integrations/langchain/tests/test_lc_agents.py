"""Tool-calling agents (langchain's create_agent, langgraph's create_react_agent): one record per
user turn with the user's question, the agent's final answer and exactly the tool outputs that the
final model call read; the tools' queries kept beside them."""

from __future__ import annotations

import asyncio
import logging
import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from groundtrace_langchain import GroundtraceCallbackHandler
from lc_agents import (
    DOC,
    PRICES,
    ScriptedChatModel,
    call,
    call_id,
    calls,
    lookup_prices,
    museum_clock,
    origin,
    retriever_tool,
    tool_origin,
    user,
)

QUESTION = "How much is an adult ticket if I buy it online?"
ANSWER = "An adult ticket costs 20 euros online."
CLOCK = "It is 10:30 am at the museum on a Tuesday."


def create_react_agent(model, tools):
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0, still shipped and used
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent as factory

        return factory(model, tools=tools)


def create_langchain_agent(model, tools):
    return create_agent(model, tools=tools, system_prompt="You answer visitors' questions about the museum.")


FACTORIES = pytest.mark.parametrize("factory", [create_langchain_agent, create_react_agent],
                                    ids=["create_agent", "create_react_agent"])


def scripted(*replies: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel(replies=list(replies))


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


@FACTORIES
def test_a_retriever_tool_agent_records_the_users_question_and_the_retrieved_passage(factory, handler, monitor, sink,
                                                                                      capture_delta):
    search = call("search_museum", query="adult ticket price online")
    agent = factory(scripted(search, AIMessage(ANSWER)), [retriever_tool()])

    state = agent.invoke(user(QUESTION), config={"callbacks": [handler]})

    assert state["messages"][-1].content == ANSWER
    record = only_record(monitor, sink)
    assert record.question == QUESTION  # not the tool's query (the bug this fixes)
    assert record.queries == ["adult ticket price online"]
    assert record.contexts == [DOC["tickets"].page_content]
    assert record.answer == ANSWER
    assert record.metadata["documents"] == [origin(DOC["tickets"], "search_museum")]
    assert "unused_contexts" not in record.metadata
    assert capture_delta() == {"roots": 1, "recorded": 1}


@FACTORIES
def test_a_plain_tool_that_searches_by_itself_is_a_context(factory, handler, monitor, sink):
    lookup = call("lookup_prices", query="adult online")
    agent = factory(scripted(lookup, AIMessage(ANSWER)), [lookup_prices])

    asyncio.run(agent.ainvoke(user(QUESTION), config={"callbacks": [handler]}))

    record = only_record(monitor, sink)
    assert (record.question, record.answer) == (QUESTION, ANSWER)
    assert record.queries == ["adult online"]
    assert record.contexts == [PRICES["adult"]]  # no retriever ran: the tool's output is the context
    assert record.metadata["documents"] == [tool_origin("lookup_prices", call_id(lookup))]


@tool
def opening_hours(day: str, section: str) -> dict:
    """Opening hours of a museum section on a day, as structured data."""
    return {"day": day, "section": section, "opens": "09:00", "closes": "18:00"}


def test_structured_tool_output_is_a_context_as_json_and_its_arguments_are_the_query(handler, monitor, sink):
    hours = call("opening_hours", day="Tuesday", section="garden")
    answer = "On Tuesday the garden is open from 09:00 to 18:00."
    create_langchain_agent(scripted(hours, AIMessage(answer)), [opening_hours]).invoke(
        user("When is the garden open on Tuesday?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.contexts == ['{"day": "Tuesday", "section": "garden", "opens": "09:00", "closes": "18:00"}']
    assert record.queries == ['{"day": "Tuesday", "section": "garden"}']  # no query argument: the arguments
    assert record.answer == answer


def test_a_longer_loop_is_one_turn_and_keeps_every_tool_output_the_final_call_read(handler, monitor, sink):
    first = call("search_museum", query="when the museum opens")
    second = call("lookup_prices", query="student price")
    answer = "The museum opens at 9 am; students pay 10 euros online on weekdays."
    agent = create_langchain_agent(scripted(first, second, AIMessage(answer)), [retriever_tool(), lookup_prices])

    agent.invoke(user("When do you open, and what do students pay?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.question == "When do you open, and what do students pay?"
    assert record.queries == ["when the museum opens", "student price"]
    assert record.contexts == [DOC["hours"].page_content, PRICES["student"]]
    assert record.metadata["documents"] == [origin(DOC["hours"], "search_museum"),
                                            tool_origin("lookup_prices", call_id(second))]


def both_tools_agent():
    both = calls(("lookup_prices", {"query": "adult"}), ("museum_clock", {}))
    answer = "It is 10:30 am, and an adult ticket costs 20 euros online."
    return create_langchain_agent(scripted(both, AIMessage(answer)), [lookup_prices, museum_clock]), both


@pytest.mark.parametrize(("options", "contexts", "unused"), [
    ({}, [PRICES["adult"], CLOCK], []),
    ({"exclude_tools": ["museum_clock"]}, [PRICES["adult"]], ["museum_clock"]),
    ({"include_tools": ["museum_clock"]}, [CLOCK], ["lookup_prices"]),
], ids=["all", "exclude", "include"])
def test_include_and_exclude_tools_choose_whose_output_is_a_context(monitor, sink, options, contexts, unused):
    agent, both = both_tools_agent()
    agent.invoke(user("What time is it, and how much is an adult ticket?"),
                 config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor, **options)]})

    record = only_record(monitor, sink)
    assert record.contexts == contexts
    ids = {"lookup_prices": call_id(both, 0), "museum_clock": call_id(both, 1)}
    assert record.metadata.get("unused_contexts", []) == [{"kind": "tool", "name": n, "id": ids[n]} for n in unused]


def test_excluding_a_retriever_tool_leaves_its_documents_out(monitor, sink):
    search = call("search_museum", query="when the museum opens")
    lookup = call("lookup_prices", query="adult")
    answer = "The museum opens at 9 am and an adult ticket costs 20 euros online."
    agent = create_langchain_agent(scripted(search, lookup, AIMessage(answer)), [retriever_tool(), lookup_prices])
    agent.invoke(user("When do you open and what does it cost?"),
                 config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor, exclude_tools=["search_museum"])]})

    record = only_record(monitor, sink)
    assert record.contexts == [PRICES["adult"]]
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": "search_museum", "id": call_id(search)},
                                                  {"kind": "document", "name": "KeywordRetriever", "id": "hours"}]


def test_turns_with_nothing_to_score_say_why_once_at_info_and_count_every_time(unsaid_reasons, monitor, sink, capture_delta,
                                                                             caplog):
    handler = GroundtraceCallbackHandler(monitor=monitor, exclude_tools=["museum_clock"])
    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        for _ in range(3):  # the agent answers without any tool
            create_langchain_agent(scripted(AIMessage("Hello! How can I help?")), [lookup_prices]).invoke(
                user("hi"), config={"callbacks": [handler]})
        for _ in range(2):  # the only tool it calls is left out
            clock = call("museum_clock")
            create_langchain_agent(scripted(clock, AIMessage(CLOCK)), [museum_clock]).invoke(
                user("What time is it?"), config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert sink.records == []
    assert capture_delta() == {"roots": 5, "no_record": {
        "no retrieval and no tool output": 3, "only tools left out by include_tools/exclude_tools": 2}}
    lines = [r.getMessage() for r in caplog.records if r.name == "groundtrace.capture"]
    assert len(lines) == 2  # once per reason, not per turn
    assert lines[0].startswith("groundtrace: a LangChain turn made no record: no retrieval and no tool output; ")
    assert lines[1].startswith("groundtrace: a LangChain turn made no record: only tools left out by "
                               "include_tools/exclude_tools")


def test_instrument_takes_the_tool_options(monitor, sink):
    from groundtrace_langchain import instrument

    instrument(monitor=monitor, exclude_tools=["museum_clock"])
    agent, _ = both_tools_agent()
    agent.invoke(user("What time is it, and how much is an adult ticket?"))

    assert only_record(monitor, sink).contexts == [PRICES["adult"]]
