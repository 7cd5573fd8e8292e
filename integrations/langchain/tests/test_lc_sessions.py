"""Every record knows its conversation (issue 30): Record.session_id is LangGraph's thread_id, else
RunnableWithMessageHistory's session_id (read from the config the root's first child runs under: it is
in the config's configurable, never in the callbacks' metadata), else the innermost
``groundtrace.session(...)`` around the call, else the run metadata's ``session_id``."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from groundtrace.capture.session import session
from langchain.agents import create_agent
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from lc_agents import DOC, ScriptedChatModel, call, museum_retriever, retriever_tool, user
from lc_app import BY_ID, rag_chain

QUESTION = "What is the capital of France?"


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


def test_a_chain_outside_any_conversation_has_no_session(handler, monitor, sink):
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert only_record(monitor, sink).session_id is None


def test_the_run_metadatas_session_id_is_the_session(handler, monitor, sink):
    rag_chain().invoke(QUESTION, config={"callbacks": [handler], "metadata": {"session_id": "chat-7"}})
    record = only_record(monitor, sink)
    assert record.session_id == "chat-7"
    assert record.contexts == [BY_ID["en-paris"].page_content]


def test_groundtrace_session_names_the_conversation_and_wins_over_the_run_metadata(handler, monitor, sink):
    with session("chat-42"):
        rag_chain().invoke(QUESTION, config={"callbacks": [handler], "metadata": {"session_id": "chat-7"}})
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})  # after the block: none

    assert monitor.flush(10)
    assert [r.session_id for r in sink.records] == ["chat-42", None]


def test_groundtrace_session_follows_an_async_run(handler, monitor, sink):
    async def ask() -> None:
        with session("chat-async"):
            await rag_chain().ainvoke(QUESTION, config={"callbacks": [handler]})

    asyncio.run(ask())
    assert only_record(monitor, sink).session_id == "chat-async"


def test_langgraphs_thread_id_wins_over_groundtrace_session(handler, monitor, sink):
    search = call("search_museum", query="adult ticket price online")
    agent = create_agent(ScriptedChatModel(replies=[search, AIMessage("20 euros online.")]), tools=[retriever_tool()])
    with session("chat-42"):
        agent.invoke(user("How much is an adult ticket online?"),
                     config={"callbacks": [handler], "configurable": {"thread_id": "thread-9"},
                             "metadata": {"session_id": "chat-7"}})

    record = only_record(monitor, sink)
    assert record.session_id == "thread-9"
    assert record.contexts == [DOC["tickets"].page_content]


def history() -> InMemoryChatMessageHistory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return InMemoryChatMessageHistory()


def history_chain(answer: str):
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from these passages only:\n{context}"), MessagesPlaceholder("history"), ("human", "{question}"),
    ])
    retrieve = RunnableLambda(lambda inputs: inputs["question"]) | museum_retriever(k=1) \
        | RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    chain = {"context": retrieve, "question": lambda x: x["question"], "history": lambda x: x["history"]} \
        | prompt | ScriptedChatModel(replies=[AIMessage(answer)]) | StrOutputParser()
    histories: dict[str, InMemoryChatMessageHistory] = {}
    with warnings.catch_warnings():  # deprecated for LangGraph's persistence, still shipped and used
        warnings.simplefilter("ignore")
        return RunnableWithMessageHistory(chain,
                                          lambda session_id: histories.setdefault(session_id, history()),
                                          input_messages_key="question", history_messages_key="history"), histories


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
def test_runnable_with_message_history_gives_its_session_id_and_wins_over_groundtrace_session(handler, monitor, sink,
                                                                                            mode):
    answer = "Adult tickets cost 20 euros online."
    chain, histories = history_chain(answer)
    question = {"question": "How much is an adult ticket online?"}
    config = {"callbacks": [handler], "configurable": {"session_id": "visitor-5"}}
    with session("chat-42"):
        if mode == "invoke":
            chain.invoke(question, config=config)
        elif mode == "ainvoke":
            asyncio.run(chain.ainvoke(question, config=config))
        else:
            assert "".join(chain.stream(question, config=config)) == answer

    assert list(histories) == ["visitor-5"] and len(histories["visitor-5"].messages) == 2
    record = only_record(monitor, sink)
    assert record.session_id == "visitor-5"
    assert (record.question, record.answer) == ("How much is an adult ticket online?", answer)
    assert record.contexts == [DOC["tickets"].page_content]
