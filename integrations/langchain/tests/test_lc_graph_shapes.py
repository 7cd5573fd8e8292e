"""LangGraph shapes beyond one agent: a hand-built grade -> rewrite -> retrieve-again loop, a
supervisor with a research agent (langgraph-supervisor, and sub-agents called as tools), and one
agent through every streaming and batching entry point. Each is one record per user turn."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any, TypedDict

import pytest
from groundtrace.metrics import get_metric
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from lc_agents import DOC, ScriptedChatModel, call, call_id, museum_retriever, origin, retriever_tool, user
from lc_app import format_documents

ANSWER = "An adult ticket costs 20 euros online."


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


# --------------------------------------------------------------------------- grade / rewrite loop
class LoopState(TypedDict, total=False):
    question: str
    query: str
    documents: list[Document]
    relevant: bool
    answer: str


GRADE = ChatPromptTemplate.from_messages([("system", "Is this passage relevant to the question? yes or no.\n{context}"),
                                          ("human", "{question}")])
REWRITE = ChatPromptTemplate.from_messages([("system", "Rewrite the question as a search query."),
                                            ("human", "{question}")])
GENERATE = ChatPromptTemplate.from_messages([("system", "Answer from these passages only:\n{context}"),
                                             ("human", "{question}")])


def grade_rewrite_graph(model: ScriptedChatModel) -> Any:
    """retrieve -> grade; not relevant: rewrite the question into a query -> retrieve again."""
    retriever = museum_retriever(k=1)

    def retrieve(state: LoopState) -> dict[str, Any]:
        return {"documents": retriever.invoke(state.get("query") or state["question"])}

    def grade(state: LoopState) -> dict[str, Any]:
        verdict = model.invoke(GRADE.invoke({"context": format_documents(state["documents"]),
                                             "question": state["question"]}))
        return {"relevant": str(verdict.content).strip().lower() == "yes"}

    def rewrite(state: LoopState) -> dict[str, Any]:
        return {"query": str(model.invoke(REWRITE.invoke({"question": state["question"]})).content)}

    def generate(state: LoopState) -> dict[str, Any]:
        reply = model.invoke(GENERATE.invoke({"context": format_documents(state["documents"]),
                                              "question": state["question"]}))
        return {"answer": reply.content}

    graph = StateGraph(LoopState)
    for name, node in (("retrieve", retrieve), ("grade", grade), ("rewrite", rewrite), ("generate", generate)):
        graph.add_node(name, node)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade")
    graph.add_conditional_edges("grade", lambda state: "generate" if state["relevant"] else "rewrite")
    graph.add_edge("rewrite", "retrieve")
    graph.add_edge("generate", END)
    return graph.compile()


def test_a_rejected_retrieval_is_not_a_context_and_the_rewritten_query_is_kept(handler, monitor, sink):
    model = ScriptedChatModel(replies=[AIMessage("no"), AIMessage("adult ticket price online"), AIMessage("yes"),
                                       AIMessage(ANSWER)])
    state = grade_rewrite_graph(model).invoke({"question": "How much for the entry?"}, config={"callbacks": [handler]})

    assert state["documents"] == [DOC["tickets"]] and state["answer"] == ANSWER
    # the grader did read the garden passage (the retrieval it rejected)
    assert DOC["garden"].page_content in str(model.inputs[0])
    record = only_record(monitor, sink)
    assert record.question == "How much for the entry?"
    assert record.queries == ["adult ticket price online"]  # the first retrieval's query is the question
    assert record.contexts == [DOC["tickets"].page_content]
    assert record.answer == ANSWER
    assert record.metadata["documents"] == [origin(DOC["tickets"])]
    assert record.metadata["unused_contexts"] == [{"kind": "document", "name": "KeywordRetriever", "id": "garden"}]


# ------------------------------------------------------------------------------------ multi-agent
RESEARCH = "Adult tickets cost 20 euros online and 25 euros at the door."


def research_agent() -> Any:
    model = ScriptedChatModel(replies=[call("search_museum", query="adult ticket price online"), AIMessage(RESEARCH)])
    return create_agent(model, tools=[retriever_tool()], name="research_expert",
                        system_prompt="You research the museum's pages.")


@pytest.mark.parametrize("output_mode", ["last_message", "full_history"])
def test_a_supervisor_answer_reads_what_its_research_agent_read(handler, monitor, sink, output_mode):
    supervisor_model = ScriptedChatModel(replies=[call("transfer_to_research_expert"), AIMessage(ANSWER)])
    with warnings.catch_warnings():  # langgraph-supervisor builds its agents with create_react_agent
        warnings.simplefilter("ignore")
        from langgraph_supervisor import create_supervisor

        app = create_supervisor([research_agent()], model=supervisor_model, prompt="Send price questions to research.",
                                output_mode=output_mode).compile()

    state = app.invoke(user("How much is an adult ticket if I buy it online?"), config={"callbacks": [handler]})

    messages: list[BaseMessage] = state["messages"]
    assert messages[-1].content == ANSWER
    # with last_message, the supervisor never sees the search result itself, only the agent's reply
    saw_tool_output = any(isinstance(m, ToolMessage) and m.name == "search_museum" for m in supervisor_model.inputs[-1])
    assert saw_tool_output == (output_mode == "full_history")
    record = only_record(monitor, sink)
    assert record.question == "How much is an adult ticket if I buy it online?"
    assert record.answer == ANSWER
    # the handoffs ("Successfully transferred to ...") are routing, not contexts
    assert record.contexts == [DOC["tickets"].page_content]
    assert record.metadata["documents"] == [origin(DOC["tickets"], "search_museum")]
    assert record.queries == ["adult ticket price online"]


def test_a_sub_agent_called_as_a_tool_brings_what_it_read(handler, monitor, sink):
    research = research_agent()

    @tool
    def ask_research(request: str) -> str:
        """Ask the research agent a question about the museum."""
        return str(research.invoke(user(request))["messages"][-1].content)

    ask = call("ask_research", request="adult ticket price")
    supervisor = create_agent(ScriptedChatModel(replies=[ask, AIMessage(ANSWER)]), tools=[ask_research])
    supervisor.invoke(user("How much is an adult ticket if I buy it online?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.question, record.answer) == ("How much is an adult ticket if I buy it online?", ANSWER)
    # the supervisor read the research agent's reply, which was written from the retrieved page
    assert record.contexts == [DOC["tickets"].page_content]
    assert record.queries == ["adult ticket price", "adult ticket price online"]
    # the reply itself is set aside as written by a model of the turn (the kit's rule), not lost
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": "ask_research", "id": call_id(ask),
                                                   "reason": "model-written"}]


def test_a_tool_that_runs_a_rag_chain_stands_for_what_its_model_read_and_a_repeated_error_is_caught(handler, monitor,
                                                                                                   sink):
    """The twin of LlamaIndex's QueryEngineTool: a tool runs a retrieval chain and returns its
    model's answer, which makes up a price (45 euros: in no document); the agent repeats it."""
    made_up = "According to the museum's pages, an adult ticket costs 45 euros online."
    chain = ({"context": museum_retriever(k=1) | format_documents, "question": RunnablePassthrough()} | GENERATE
             | ScriptedChatModel(replies=[AIMessage(made_up)]) | StrOutputParser())

    @tool
    def ask_docs(question: str) -> str:
        """Answer a question from the museum's pages."""
        return chain.invoke(question)

    repeated = "An adult ticket costs 45 euros online."
    ask = call("ask_docs", question="adult ticket price online")
    create_agent(ScriptedChatModel(replies=[ask, AIMessage(repeated)]), tools=[ask_docs]).invoke(
        user("How much is an adult ticket if I buy it online?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.answer, record.queries) == (repeated, ["adult ticket price online"])
    assert record.contexts == [DOC["tickets"].page_content]  # what the chain's model read, not its answer
    assert record.metadata["unused_contexts"] == [{"kind": "tool", "name": "ask_docs", "id": call_id(ask),
                                                   "reason": "model-written"}]
    flagged = get_metric("facts").score(record).flagged_text().split("; ")
    assert '"45 euros"' in flagged
    # measured against the chain's answer, as the tool's output, the error would pass
    assert '"45 euros"' not in get_metric("facts").score(record.model_copy(update={"contexts": [made_up]})) \
        .flagged_text().split("; ")


def test_a_tool_that_writes_its_result_with_a_model_from_data_it_fetched_itself_stays_a_context(handler, monitor,
                                                                                               sink):
    summary = "Adult tickets are 20 euros online; students pay half price on weekdays."
    writer = ScriptedChatModel(replies=[AIMessage(summary)])

    @tool
    def price_digest(topic: str) -> str:
        """A digest of the price table, written by a model."""
        table = {"adult": "20 EUR online", "student": "half price, weekdays"}  # fetched by code, no retriever
        return str(writer.invoke(f"Summarise for a visitor: {table}").content)

    agent = create_agent(ScriptedChatModel(replies=[call("price_digest", topic="tickets"), AIMessage(ANSWER)]),
                         tools=[price_digest])
    agent.invoke(user("How much is an adult ticket if I buy it online?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    # the model inside the tool read no passage the turn saw: the tool's output is the context
    assert record.contexts == [summary]
    assert "unused_contexts" not in record.metadata
    assert record.queries == ["tickets"]


# ------------------------------------------------------------------- one agent, every entry point
QUESTIONS = {
    "How much is an adult ticket if I buy it online?": ("adult ticket price online", "tickets",
                                                        "An adult ticket costs 20 euros online."),
    "When does the museum open?": ("when the museum opens", "hours", "The museum opens at 9 am."),
    "What do students pay?": ("students price", "students", "Students pay half price on weekdays."),
}


def respond(messages: list[BaseMessage]) -> AIMessage:
    """Search first, then answer: by the conversation, so that concurrent runs get their own script."""
    question = next(str(m.content) for m in messages if m.type == "human")
    query, _, answer = QUESTIONS[question]
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(answer)
    return call("search_museum", query=query)


def streaming_agent() -> Any:
    return create_agent(ScriptedChatModel(respond=respond), tools=[retriever_tool()])


def assert_agent_records(sink, questions=tuple(QUESTIONS)) -> None:
    records = sink.by_question()
    assert sorted(records) == sorted(questions) and len(sink.records) == len(questions)
    for question in questions:
        query, doc_id, answer = QUESTIONS[question]
        record = records[question]
        assert (record.queries, record.contexts, record.answer) == ([query], [DOC[doc_id].page_content], answer)
        assert record.metadata["documents"] == [origin(DOC[doc_id], "search_museum")]


QUESTION = "How much is an adult ticket if I buy it online?"


@pytest.mark.parametrize("stream_mode", ["messages", "updates", "values", ["messages", "updates"]])
def test_agent_stream_in_every_mode(handler, monitor, sink, stream_mode):
    chunks = list(streaming_agent().stream(user(QUESTION), config={"callbacks": [handler]}, stream_mode=stream_mode))

    assert chunks
    if stream_mode == "messages":  # the final answer came token by token
        tokens = [chunk.content for chunk, meta in chunks if meta["langgraph_node"] == "model" and chunk.content]
        assert "".join(tokens) == QUESTIONS[QUESTION][2]
    assert monitor.flush(10)
    assert_agent_records(sink, [QUESTION])


def test_agent_astream_and_astream_events(handler, monitor, sink):
    async def consume() -> list[str]:
        agent = streaming_agent()
        async for _ in agent.astream(user(QUESTION), config={"callbacks": [handler]}, stream_mode="messages"):
            pass
        return [event["event"] async for event in agent.astream_events(user("When does the museum open?"),
                                                                        version="v2", config={"callbacks": [handler]})]

    events = asyncio.run(consume())
    assert {"on_tool_end", "on_retriever_end", "on_chat_model_stream"} <= set(events)
    assert monitor.flush(10)
    assert_agent_records(sink, [QUESTION, "When does the museum open?"])


def test_agent_batch_abatch_and_run_ids(handler, monitor, sink):
    agent = streaming_agent()
    run_id = uuid.uuid4()
    agent.invoke(user(QUESTION), config={"callbacks": [handler], "run_id": run_id})
    agent.batch([user(q) for q in QUESTIONS if q != QUESTION], config={"callbacks": [handler]})
    assert monitor.flush(10)
    assert_agent_records(sink)
    assert sink.by_question()[QUESTION].run_id == str(run_id)

    sink.emitted.clear()
    asyncio.run(agent.abatch([user(q) for q in QUESTIONS], config={"callbacks": [handler]}))
    assert monitor.flush(10)
    assert_agent_records(sink)
