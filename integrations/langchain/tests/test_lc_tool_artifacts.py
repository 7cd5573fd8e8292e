"""A tool with ``response_format="content_and_artifact"`` whose artifact is Documents (the LangChain
RAG-agent tutorial's ``retrieve_context``: a vector store's similarity_search, serialized for the model,
the Documents as the artifact): those Documents are the contexts, one each, with their ids and metadata,
in place of the serialized text. Any other artifact leaves the tool's text the context, as before."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver

from lc_agents import CURRENT, DOC, ScriptedChatModel, call, call_id, origin, tool_origin, user

QUESTION = "How much is an adult ticket if I buy it online?"
ANSWER = "An adult ticket costs 20 euros online."
QUERY = "adult ticket price online"


def museum_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents(CURRENT)
    return store


def tutorial_tool(store: InMemoryVectorStore):
    @tool(response_format="content_and_artifact")
    def retrieve_context(query: str):
        """Retrieve information to help answer a query."""
        retrieved_docs = store.similarity_search(query, k=2)
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    return retrieve_context


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


def test_the_tutorials_retrieve_context_tool_gives_its_documents_as_the_contexts(handler, monitor, sink):
    store = museum_store()
    found = store.similarity_search(QUERY, k=2)
    assert len(found) == 2 and all(d.id in DOC for d in found)
    search = call("retrieve_context", query=QUERY)
    model = ScriptedChatModel(replies=[search, AIMessage(ANSWER)])
    create_agent(model, tools=[tutorial_tool(store)]).invoke(user(QUESTION), config={"callbacks": [handler]})

    [message] = [m for m in model.inputs[-1] if isinstance(m, ToolMessage)]
    assert message.content.startswith("Source: {") and message.artifact == found  # the tutorial's shape
    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.queries) == (QUESTION, ANSWER, [QUERY])
    assert record.contexts == [d.page_content for d in found]  # each Document, not the serialized text
    assert record.metadata["documents"] == [origin(DOC[d.id], "retrieve_context") for d in found]
    assert "unused_contexts" not in record.metadata


def test_an_artifact_document_from_an_earlier_turn_says_so(handler, monitor, sink):
    store = museum_store()
    found = store.similarity_search(QUERY, k=2)
    model = ScriptedChatModel(replies=[call("retrieve_context", query=QUERY), AIMessage(ANSWER),
                                       AIMessage("Online it is 20 euros, at the door 25.")])
    agent = create_agent(model, tools=[tutorial_tool(store)], checkpointer=InMemorySaver())
    config = {"callbacks": [handler], "configurable": {"thread_id": "visitor-3"}}
    agent.invoke(user(QUESTION), config=config)
    agent.invoke(user("And at the door?"), config=config)

    assert monitor.flush(10)
    turn_1, turn_2 = sink.records
    assert turn_1.metadata["documents"] == [origin(DOC[d.id], "retrieve_context") for d in found]
    assert turn_2.contexts == [d.page_content for d in found]  # the thread carried turn 1's artifact
    # each Document names the turn whose tool call returned it
    assert turn_2.metadata["documents"] == [{**origin(DOC[d.id], "retrieve_context"), "turn": turn_1.run_id}
                                            for d in found]
    assert turn_2.session_id == "visitor-3"


@tool(response_format="content_and_artifact")
def price_table(query: str):
    """The museum's price table, with the raw rows as the artifact."""
    return "Adult ticket: 20 EUR online, 25 EUR at the door.", {"adult": [20, 25]}


def test_an_artifact_that_is_not_documents_leaves_the_tools_text_the_context(handler, monitor, sink):
    lookup = call("price_table", query="adult")
    create_agent(ScriptedChatModel(replies=[lookup, AIMessage(ANSWER)]), tools=[price_table]).invoke(
        user(QUESTION), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.contexts == ["Adult ticket: 20 EUR online, 25 EUR at the door."]
    assert record.metadata["documents"] == [tool_origin("price_table", call_id(lookup))]


def test_a_single_document_artifact_is_one_context(handler, monitor, sink):
    @tool(response_format="content_and_artifact")
    def garden_page(query: str):
        """The garden's page."""
        page = DOC["garden"]
        return f"[garden.md] {page.page_content}", Document(page.page_content, id=page.id, metadata=page.metadata)

    lookup = call("garden_page", query="garden entry")
    answer = "Entry to the garden is free."
    create_agent(ScriptedChatModel(replies=[lookup, AIMessage(answer)]), tools=[garden_page]).invoke(
        user("Is the garden free?"), config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.contexts == [DOC["garden"].page_content]
    assert record.metadata["documents"] == [origin(DOC["garden"], "garden_page")]
