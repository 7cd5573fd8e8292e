"""Conversations and retrieval that drops what it retrieved: a checkpointed agent thread (turn 2's
question is turn 2's message; turn 1's tool output is a context only when the final call read it),
a history-aware retrieval chain (the literal follow-up is the question, the condensed one a query),
and a ContextualCompressionRetriever (what the compressor dropped never reaches the contexts)."""

from __future__ import annotations

import asyncio

import pytest
from groundtrace.capture.earlier_turns import EarlierCalls
from groundtrace.monitor import Monitor
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import LLMChainFilter
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langgraph.checkpoint.memory import InMemorySaver

from groundtrace_langchain import GroundtraceCallbackHandler
from groundtrace_langchain.collector import COLLECTOR
from lc_agents import DOC, ScriptedChatModel, call, museum_retriever, origin, retriever_tool, tool_origin, user
from lc_app import PROMPT, CollectingSink, format_documents


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


# -------------------------------------------------------------------------- a checkpointed thread
TURN_1 = "How much is an adult ticket if I buy it online?"
TURN_2 = "And what do students pay?"
ANSWER_1 = "An adult ticket costs 20 euros online."
ANSWER_2 = "Students pay half price on weekdays, so 10 euros online."


def thread_agent(replies: list[AIMessage], **options) -> tuple:
    model = ScriptedChatModel(replies=replies)
    agent = create_agent(model, tools=[retriever_tool()], checkpointer=InMemorySaver(), **options)
    return agent, model


def two_turns(agent, handler, monitor, sink) -> tuple:
    config = {"callbacks": [handler], "configurable": {"thread_id": "visitor-1"}}
    agent.invoke(user(TURN_1), config=config)
    turn_1 = only_record(monitor, sink)
    sink.emitted.clear()
    agent.invoke(user(TURN_2), config=config)
    return turn_1, only_record(monitor, sink)


def test_turn_2_answered_from_the_thread_reads_turn_1s_tool_output(handler, monitor, sink):
    search = call("search_museum", query="adult ticket price online")
    agent, _ = thread_agent([search, AIMessage(ANSWER_1), AIMessage(ANSWER_2)])  # turn 2 calls no tool

    turn_1, turn_2 = two_turns(agent, handler, monitor, sink)

    assert (turn_1.question, turn_1.answer, turn_1.contexts) == (TURN_1, ANSWER_1, [DOC["tickets"].page_content])
    assert turn_2.question == TURN_2  # turn 2's own message, not turn 1's, not a tool query
    assert turn_2.answer == ANSWER_2
    assert turn_2.queries is None
    # turn 1's search result is in the thread's messages, so the final call of turn 2 read it
    assert turn_2.contexts == [DOC["tickets"].page_content]
    # item 4 of issue 30: the entry names the earlier turn whose tool output this turn read again
    assert turn_2.metadata["documents"] == [{**tool_origin("search_museum", search.tool_calls[0]["id"]),
                                             "turn": turn_1.run_id}]
    assert turn_1.metadata["documents"] == [origin(DOC["tickets"], "search_museum")]  # its own retrieval
    assert turn_1.run_id != turn_2.run_id
    assert turn_1.session_id == turn_2.session_id == "visitor-1"  # LangGraph's thread_id


def test_turn_1s_tool_output_cleared_from_the_final_call_is_not_a_context_of_turn_2(handler, monitor, sink):
    search_1 = call("search_museum", query="adult ticket price online")
    search_2 = call("search_museum", query="students price")
    # the middleware clears all but the last tool result from what the model reads
    clear_old = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1, keep=1)])
    agent, model = thread_agent([search_1, AIMessage(ANSWER_1), search_2, AIMessage(ANSWER_2)], middleware=[clear_old])

    turn_1, turn_2 = two_turns(agent, handler, monitor, sink)

    final_input = model.inputs[-1]
    assert [m.content for m in final_input if isinstance(m, ToolMessage)] == ["[cleared]", DOC["students"].page_content]
    assert turn_1.contexts == [DOC["tickets"].page_content]
    assert (turn_2.question, turn_2.answer, turn_2.queries) == (TURN_2, ANSWER_2, ["students price"])
    assert turn_2.contexts == [DOC["students"].page_content]
    assert turn_2.metadata["documents"] == [origin(DOC["students"], "search_museum")]


def test_turn_2_that_searches_again_reads_both_turns_results_in_thread_order(handler, monitor, sink):
    search_1 = call("search_museum", query="adult ticket price online")
    search_2 = call("search_museum", query="students price")
    agent, _ = thread_agent([search_1, AIMessage(ANSWER_1), search_2, AIMessage(ANSWER_2)])

    turn_1, turn_2 = two_turns(agent, handler, monitor, sink)

    assert turn_2.contexts == [DOC["tickets"].page_content, DOC["students"].page_content]
    assert turn_2.metadata["documents"] == [{**tool_origin("search_museum", search_1.tool_calls[0]["id"]),
                                             "turn": turn_1.run_id},
                                            origin(DOC["students"], "search_museum")]
    assert turn_2.queries == ["students price"]


def after_turn_1(handler, monitor, sink):
    """Turn 1 of thread visitor-1 has run (the museum search) and its record is taken: (its tool call, the agent,
    the thread's config) for turn 2."""
    search = call("search_museum", query="adult ticket price online")
    agent, _ = thread_agent([search, AIMessage(ANSWER_1), AIMessage(ANSWER_2)])
    config = {"callbacks": [handler], "configurable": {"thread_id": "visitor-1"}}
    agent.invoke(user(TURN_1), config=config)
    only_record(monitor, sink)
    sink.emitted.clear()
    return search, agent, config


def test_an_earlier_turn_this_process_does_not_remember_is_only_said_to_be_earlier(handler, monitor, sink,
                                                                                   monkeypatch):
    search, agent, config = after_turn_1(handler, monitor, sink)
    # the thread's turn 1 ran in another process (or was forgotten since): its tool calls are not known here
    COLLECTOR.earlier_calls()  # turn 1's calls filed, then forgotten
    monkeypatch.setattr(COLLECTOR, "_earlier", EarlierCalls())

    agent.invoke(user(TURN_2), config=config)

    turn_2 = only_record(monitor, sink)
    assert turn_2.contexts == [DOC["tickets"].page_content]
    assert turn_2.metadata["documents"] == [{**tool_origin("search_museum", search.tool_calls[0]["id"]),
                                             "earlier_turn": True}]


def test_an_earlier_call_id_remembered_with_another_output_names_no_turn(handler, monitor, sink):
    search, agent, config = after_turn_1(handler, monitor, sink)
    # another conversation's call under the same id (a provider's reused id), whose output was another text
    COLLECTOR.earlier_calls().remember(search.tool_calls[0]["id"], "Closed on Mondays.", "another-turn", error=False)

    agent.invoke(user(TURN_2), config=config)

    turn_2 = only_record(monitor, sink)
    assert turn_2.metadata["documents"] == [{**tool_origin("search_museum", search.tool_calls[0]["id"]),
                                             "earlier_turn": True}]


# ------------------------------------------------------------------------ a history-aware chain
CONDENSE = ChatPromptTemplate.from_messages([
    MessagesPlaceholder("chat_history"), ("human", "{input}"),
    ("human", "Given the conversation above, write a standalone search query."),
])
QA = ChatPromptTemplate.from_messages([
    ("system", "Answer from these passages only:\n\n{context}"), MessagesPlaceholder("chat_history"), ("human", "{input}"),
])
HISTORY = [HumanMessage(TURN_1), AIMessage(ANSWER_1)]
CONDENSED = "What price do students pay on weekdays?"


def conversational_chain(replies: list[str]):
    model = ScriptedChatModel(replies=[AIMessage(r) for r in replies])
    retriever = create_history_aware_retriever(model, museum_retriever(k=1), CONDENSE)
    return create_retrieval_chain(retriever, create_stuff_documents_chain(model, QA))


def test_history_aware_chain_records_the_literal_follow_up_and_keeps_the_condensed_query(handler, monitor, sink):
    chain = conversational_chain([CONDENSED, ANSWER_2])
    result = chain.invoke({"input": TURN_2, "chat_history": HISTORY}, config={"callbacks": [handler]})

    assert result["answer"] == ANSWER_2 and result["context"] == [DOC["students"]]
    record = only_record(monitor, sink)
    assert record.question == TURN_2  # what the user typed; the condensed question is a derived query
    assert record.queries == [CONDENSED]
    assert record.contexts == [DOC["students"].page_content]
    assert record.answer == ANSWER_2
    assert record.metadata["documents"] == [origin(DOC["students"])]


def test_history_aware_chain_first_turn_has_no_derived_query(handler, monitor, sink):
    asyncio.run(conversational_chain([ANSWER_1]).ainvoke({"input": "What does an adult ticket cost online?",
                                                          "chat_history": []}, config={"callbacks": [handler]}))
    record = only_record(monitor, sink)
    assert (record.question, record.queries) == ("What does an adult ticket cost online?", None)
    assert record.contexts == [DOC["tickets"].page_content]


# ------------------------------------------------------------------ a compression retriever
COMPRESSED_QUESTION = "What does an adult museum ticket cost, and what do students pay?"
CANDIDATES = [DOC["tickets"], DOC["stale"], DOC["students"], DOC["hours"]]


def relevance(messages: list[BaseMessage]) -> AIMessage:
    """The filter's verdict: the archived price page and the opening hours are not relevant."""
    text = str(messages[-1].content)
    return AIMessage("NO" if ("45 euros" in text or "opens at 9" in text) else "YES")


def compression_chain(answer: str):
    base = museum_retriever(k=4, documents=CANDIDATES)
    compressed = ContextualCompressionRetriever(base_compressor=LLMChainFilter.from_llm(
        ScriptedChatModel(respond=relevance)), base_retriever=base)
    answer_model = ScriptedChatModel(replies=[AIMessage(answer)])
    return {"context": compressed | RunnableLambda(format_documents), "question": RunnablePassthrough()} \
        | PROMPT | answer_model | StrOutputParser()


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_compression_retriever_contexts_are_the_documents_it_kept(handler, monitor, sink, mode):
    answer = "An adult ticket costs 20 euros online; students pay half price on weekdays."
    chain = compression_chain(answer)
    # the base retriever returns all four candidates
    assert museum_retriever(k=4, documents=CANDIDATES).invoke(COMPRESSED_QUESTION) == CANDIDATES
    if mode == "invoke":
        chain.invoke(COMPRESSED_QUESTION, config={"callbacks": [handler]})
    else:
        assert "".join(chain.stream(COMPRESSED_QUESTION, config={"callbacks": [handler]})) == answer

    record = only_record(monitor, sink)
    assert record.question == COMPRESSED_QUESTION and record.answer == answer
    assert record.contexts == [DOC["tickets"].page_content, DOC["students"].page_content]
    assert record.metadata["documents"] == [origin(DOC["tickets"]), origin(DOC["students"])]
    assert record.metadata["unused_contexts"] == [{"kind": "document", "name": "KeywordRetriever", "id": "stale"},
                                                  {"kind": "document", "name": "KeywordRetriever", "id": "hours"}]
    assert record.queries is None  # both retrievers searched for the question itself


def test_a_planted_error_in_a_dropped_document_no_longer_hides_a_wrong_answer():
    # the answer repeats the archived page's error: with all four candidates as contexts, `facts`
    # found its 45 euros supported; with what reached the prompt, it is flagged
    sink = CollectingSink()
    with Monitor(metrics=["facts"], sinks=[sink], flush_at_exit=False) as monitor:
        compression_chain("An adult ticket costs 45 euros online.").invoke(
            COMPRESSED_QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]})
        assert monitor.flush(30)
    [(record, [score])] = sink.emitted
    assert DOC["stale"].page_content not in record.contexts
    assert score.error is None and score.hallucinated is True
    assert "45 euros" in score.reason
