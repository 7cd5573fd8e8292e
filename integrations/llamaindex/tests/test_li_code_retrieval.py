"""RAG written as code with LlamaIndex: a CustomQueryEngine, a vector store queried by hand, a prompt
template filled from a variable, an f-string. Each gives a record with the user's question, the answer
and the retrieved texts (``metadata["contexts_from"]`` says where they came from), or, where nothing
LlamaIndex shows holds the contexts, a WARNING with the fix and a record once @groundtrace.retrieval
marks the retrieval. Real LlamaIndex objects: a vector index with MockEmbedding, a scripted LLM."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import groundtrace
import groundtrace_llamaindex
from li_support import ANSWER, CONTEXTS, DORM_EN, QUESTION, TOP_K, ScriptedLLM, assert_nothing_left
from llama_index.core import PromptTemplate, Settings
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores import VectorStoreQuery
from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

QA = PromptTemplate("Context:\n{context_str}\n\nQuestion: {query_str}\nAnswer:")
NODE_IDS = ["dorm-en#0", "dorm-ru#0"]  # what the index's vector store gives for any query (MockEmbedding)


def query_store(index: Any, query: str) -> list[BaseNode]:
    """A vector store queried by hand: embed, query, read the nodes back from the docstore."""
    embedding = Settings.embed_model.get_query_embedding(query)
    found = index.vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=TOP_K))
    return [index.docstore.get_node(node_id) for node_id in found.ids]


def joined(nodes: list[BaseNode]) -> str:
    return "\n\n".join(node.get_content() for node in nodes)


def only_record(monitor: Any, sink: Any) -> Any:
    assert monitor.flush(10)
    [record] = sink.records
    return record


class RetrieverEngine(CustomQueryEngine):
    """The docs' CustomQueryEngine: a retriever, then the LLM on a filled template."""

    retriever: BaseRetriever
    llm: Any

    def custom_query(self, query_str: str) -> str:
        nodes = self.retriever.retrieve(query_str)
        return str(self.llm.complete(QA.format(context_str=joined([n.node for n in nodes]), query_str=query_str)))


def test_a_custom_query_engine_with_a_retriever(index, instrumented, sink):
    RetrieverEngine(retriever=index.as_retriever(similarity_top_k=TOP_K), llm=ScriptedLLM()).query(QUESTION)
    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, CONTEXTS)
    assert "contexts_from" not in record.metadata  # LlamaIndex's own retrieval, said by its absence


def test_a_vector_store_queried_by_hand_and_a_template_filled_by_predict(index, instrumented, sink):
    llm = ScriptedLLM()

    class ByHand(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return llm.predict(QA, context_str=joined(query_store(index, query_str)), query_str=query_str)

    ByHand().query(QUESTION)
    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [joined(query_store(index, QUESTION))])
    assert record.metadata["contexts_from"] == "prompt variable 'context_str'"
    assert_nothing_left()


def test_an_f_string_over_a_store_queried_by_hand_is_said_then_recorded_once_marked(index, instrumented, sink, caplog):
    llm = ScriptedLLM()
    with caplog.at_level(logging.WARNING, logger="groundtrace.capture"):
        nodes = query_store(index, QUESTION)
        llm.complete(f"Answer from:\n{joined(nodes)}\n\nQuestion: {QUESTION}")
    assert instrumented.flush(10)
    assert sink.records == []
    assert "a model call with no engine, agent or workflow around it; if it answered from text your code retrieved " \
           "(a vector store queried by hand), decorate your retrieval function with @groundtrace.retrieval" in caplog.text
    no_record = {"a model call with no engine, agent or workflow around it": 1}
    assert groundtrace_llamaindex.stats().no_record == no_record and instrumented.stats.no_record == 1

    marked = groundtrace.retrieval(query_store)
    nodes = marked(index, QUESTION)
    llm.complete(f"Answer from:\n{nodes[0].get_content()}\n\nQuestion: {QUESTION}")

    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [DORM_EN])
    assert record.metadata["contexts_from"] == "@groundtrace.retrieval 'query_store'"
    assert [node["id"] for node in record.metadata["nodes"]] == ["dorm-en#0"]
    assert record.metadata["unused_contexts"] == [{"kind": "document", "name": "@groundtrace.retrieval 'query_store'",
                                                   "id": "dorm-ru#0"}]
    assert groundtrace_llamaindex.stats().no_record == no_record  # the marked turn is no longer a bare model call


def test_a_marked_retrieval_inside_a_custom_query_engine_is_that_queries(index, instrumented, sink):
    llm = ScriptedLLM()
    search = groundtrace.retrieval(name="docstore")(query_store)

    class Marked(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return str(llm.complete(f"Notes: {joined(search(index, query_str))}\nQ: {query_str}"))

    Marked().query(QUESTION)
    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, CONTEXTS)
    assert record.metadata["contexts_from"] == "@groundtrace.retrieval 'docstore'"
    assert [node["id"] for node in record.metadata["nodes"]] == NODE_IDS


def test_a_workflow_step_with_a_marked_async_retrieval(index, instrumented, sink):
    llm = ScriptedLLM()

    @groundtrace.retrieval
    async def lookup(query: str) -> list[BaseNode]:
        await asyncio.sleep(0)
        return query_store(index, query)

    class Answer(Workflow):
        @step
        async def answer(self, ev: StartEvent) -> StopEvent:
            nodes = await lookup(ev.query)
            reply = await llm.acomplete(f"Context: {joined(nodes)}\nQuestion: {ev.query}")
            return StopEvent(result=str(reply))

    async def go() -> Any:
        return await Answer().run(query=QUESTION)

    asyncio.run(go())
    record = only_record(instrumented, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, CONTEXTS)
    assert record.metadata["contexts_from"] == "@groundtrace.retrieval 'lookup'"
    assert_nothing_left()


def test_a_turn_block_around_a_query_engine_leaves_the_engines_record_only(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)
    with groundtrace.turn(QUESTION, monitor=instrumented) as turn:
        turn.answer = str(engine.query(QUESTION))
    record = only_record(instrumented, sink)
    assert record.id.startswith("RetrieverQueryEngine.query-") and record.contexts == CONTEXTS
