"""RAG written as code: retrieval in a function, a vector store searched by hand, a prompt filled from a
variable. Every shape the LangChain and LangGraph docs show gives a record with the user's question, the
answer and the retrieved texts, and says where they came from (``metadata["contexts_from"]``); where no
callback can see the contexts (an f-string prompt), a WARNING names the cause and the fix, and
@groundtrace.retrieval gives the record. Real LangChain and LangGraph objects: fake chat models, an
in-memory vector store."""

from __future__ import annotations

import asyncio
import logging
from operator import itemgetter
from typing import Any, TypedDict

import groundtrace
import pytest
from groundtrace.capture import explicit
from groundtrace_langchain import GroundtraceCallbackHandler, instrument, uninstrument
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough, chain
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, StateGraph
from lc_app import CORPUS, PROMPT, BagOfWordsEmbeddings, KeywordRetriever, format_documents, words

QUESTION = "When was the Eiffel Tower in Paris completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
EIFFEL, PARIS = CORPUS[1], CORPUS[0]  # the two passages that share words with the question, most first
JOINED = f"{EIFFEL.page_content}\n\n{PARIS.page_content}"
FORMATTED = format_documents([EIFFEL, PARIS])  # the test app's format_docs: one per line
STORE = InMemoryVectorStore.from_documents(CORPUS, BagOfWordsEmbeddings())


def search_documents(query: str) -> list[Document]:
    """Retrieval as people write it: a function over their own index (here, shared words, most first)."""
    hits = sorted(((len(words(query) & words(d.page_content)), i, d) for i, d in enumerate(CORPUS)),
                  key=lambda hit: (-hit[0], hit[1]))
    return [d for shared, _, d in hits if shared][:2]


def search_text(query: str) -> str:
    return "\n\n".join(d.page_content for d in search_documents(query))


def model() -> FakeListChatModel:
    return FakeListChatModel(responses=[ANSWER] * 4)


def only_record(monitor, sink):
    assert monitor.flush(10)
    [record] = sink.records
    return record


def documents_of(*documents: Document) -> list[dict[str, Any]]:
    return [{"id": d.id, "source": d.metadata.get("source"), "metadata": d.metadata} for d in documents]


# ---------------------------------------------------------------------------------- the shapes
def strings_chain():
    """{"context": RunnableLambda(search), "question": RunnablePassthrough()} | prompt | llm, search giving text."""
    return {"context": RunnableLambda(search_text), "question": RunnablePassthrough()} | PROMPT | model() | StrOutputParser()


def documents_chain():
    """The same with a function returning Documents and a format_docs step."""
    return ({"context": RunnableLambda(search_documents) | format_documents, "question": RunnablePassthrough()}
            | PROMPT | model() | StrOutputParser())


def chain_function():
    """@chain: store.similarity_search(q), then prompt.invoke(...), then llm.invoke(...)."""
    llm = model()

    @chain
    def answer(question: str) -> str:
        documents = STORE.similarity_search(question, k=2)
        return llm.invoke(PROMPT.invoke({"context": format_documents(documents), "question": question})).content

    return answer


def itemgetter_chain():
    """itemgetter("question") | RunnableLambda(search) with dict input."""
    return ({"context": itemgetter("question") | RunnableLambda(search_documents) | format_documents,
             "question": itemgetter("question")} | PROMPT | model() | StrOutputParser())


def system_message_chain():
    """The context in the system message of ChatPromptTemplate.from_messages, a plain PromptTemplate after it."""
    prompt = ChatPromptTemplate.from_messages([("system", "You answer from these notes.\n\nNotes:\n{context}"),
                                               ("human", "{question}")])
    return {"context": RunnableLambda(search_text), "question": RunnablePassthrough()} | prompt | model() | StrOutputParser()


def string_prompt_chain():
    prompt = PromptTemplate.from_template("Use the sources.\n{sources}\nQuestion: {question}\nAnswer:")
    return {"sources": RunnableLambda(search_text), "question": RunnablePassthrough()} | prompt | model() | StrOutputParser()


def parallel_assign_chain():
    """RunnableParallel({"context": fn_returning_documents, ...}).assign(answer=...)."""
    answer = ((lambda state: {"context": format_documents(state["context"]), "question": state["question"]})
              | PROMPT | model() | StrOutputParser())
    return RunnableParallel({"context": RunnableLambda(search_documents), "question": RunnablePassthrough()}).assign(
        answer=answer)


SHAPES = {
    "strings": (strings_chain, QUESTION, [JOINED], "prompt variable 'context'"),
    "documents and format_docs": (documents_chain, QUESTION, [EIFFEL.page_content, PARIS.page_content],
                                  "output of 'search_documents'"),
    "@chain and a vector store": (chain_function, QUESTION, [FORMATTED], "prompt variable 'context'"),
    "itemgetter with dict input": (itemgetter_chain, {"question": QUESTION}, [EIFFEL.page_content, PARIS.page_content],
                                   "output of 'search_documents'"),
    "system message": (system_message_chain, QUESTION, [JOINED], "prompt variable 'context'"),
    "string prompt": (string_prompt_chain, QUESTION, [JOINED], "prompt variable 'sources'"),
    "parallel assign": (parallel_assign_chain, QUESTION, [EIFFEL.page_content, PARIS.page_content],
                        "output of 'search_documents'"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_gives_a_record_of_the_question_answer_and_retrieved_texts(shape, handler, monitor, sink):
    build, given, contexts, origin = SHAPES[shape]
    build().invoke(given, config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, contexts)
    assert record.metadata["contexts_from"] == origin
    assert "contexts_unchecked" not in record.metadata  # each passage was found in the model's input
    if origin.startswith("output"):  # Documents keep their ids and metadata
        assert record.metadata["documents"] == documents_of(EIFFEL, PARIS)


def test_the_forms_of_running_a_chain_give_the_same_record(handler, monitor, sink):
    config = {"callbacks": [handler]}
    strings_chain().invoke(QUESTION, config=config)
    asyncio.run(strings_chain().ainvoke(QUESTION, config=config))
    assert "".join(strings_chain().stream(QUESTION, config=config)) == ANSWER

    async def astream() -> str:
        return "".join([chunk async for chunk in strings_chain().astream(QUESTION, config=config)])

    assert asyncio.run(astream()) == ANSWER
    strings_chain().batch([QUESTION, QUESTION], config=config)
    asyncio.run(documents_chain().abatch([QUESTION], config=config))

    assert monitor.flush(10)
    found = [(r.question, r.answer, r.contexts, r.metadata["contexts_from"]) for r in sink.records]
    assert found == [(QUESTION, ANSWER, [JOINED], "prompt variable 'context'")] * 6 + [
        (QUESTION, ANSWER, [EIFFEL.page_content, PARIS.page_content], "output of 'search_documents'")]


# -------------------------------------------------------------------------------- LangGraph
class TextState(TypedDict, total=False):
    question: str
    context: str
    answer: str


class DocumentState(TypedDict, total=False):
    question: str
    context: list[Document]
    answer: str


def graph(state: type, retrieve: Any, generate: Any) -> Any:
    builder = StateGraph(state)
    builder.add_node("retrieve", retrieve)
    builder.add_node("generate", generate)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "generate")
    builder.add_edge("generate", END)
    return builder.compile()


def test_a_graph_node_that_puts_retrieved_text_in_the_state(handler, monitor, sink):
    llm = model()

    def generate(state: TextState) -> dict[str, str]:  # an f-string prompt: only the state carries the context
        return {"answer": llm.invoke(f"Context:\n{state['context']}\n\nQuestion: {state['question']}").content}

    graph(TextState, lambda state: {"context": search_text(state["question"])}, generate).invoke(
        {"question": QUESTION}, config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [JOINED])
    assert record.metadata["contexts_from"] == "output 'context' of 'LangGraph'"


def test_the_tutorial_graph_with_documents_in_the_state_in_every_form(handler, monitor, sink):
    """LangChain's RAG tutorial: retrieve puts Documents under "context", generate fills a prompt from them."""
    llm = model()

    def generate(state: DocumentState) -> dict[str, str]:
        messages = PROMPT.invoke({"question": state["question"], "context": format_documents(state["context"])})
        return {"answer": llm.invoke(messages).content}

    app = graph(DocumentState, lambda state: {"context": STORE.similarity_search(state["question"], k=2)}, generate)
    config = {"callbacks": [handler]}
    app.invoke({"question": QUESTION}, config=config)
    list(app.stream({"question": QUESTION}, config=config, stream_mode="updates"))
    asyncio.run(app.ainvoke({"question": QUESTION}, config=config))

    assert monitor.flush(10)
    assert len(sink.records) == 3
    for record in sink.records:
        assert (record.question, record.answer) == (QUESTION, ANSWER)
        assert record.contexts == [EIFFEL.page_content, PARIS.page_content]
        assert record.metadata["contexts_from"] == "output 'context' of 'LangGraph'"
        assert [d["id"] for d in record.metadata["documents"]] == [EIFFEL.id, PARIS.id]


# ------------------------------------------------------------------------------- the order of trust
def test_a_retrievers_documents_come_before_the_prompts_variables(handler, monitor, sink):
    retriever = KeywordRetriever(documents=CORPUS, k=1)
    ({"context": retriever | format_documents, "question": RunnablePassthrough()} | PROMPT | model()
     | StrOutputParser()).invoke(QUESTION, config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.contexts == [EIFFEL.page_content]
    assert "contexts_from" not in record.metadata  # the framework's own retriever: said by its absence


def test_only_the_answers_prompt_is_read_not_a_condense_step_before_it(handler, monitor, sink):
    condense = PromptTemplate.from_template("Facts so far: {context}\nRewrite as one question: {question}")
    rewriter = FakeListChatModel(responses=["When was the Eiffel Tower completed?"])
    earlier = "An unrelated earlier note about opening hours of the museum shop."

    @chain
    def answer(question: str) -> str:
        standalone = rewriter.invoke(condense.invoke({"context": earlier, "question": question})).content
        prompt = PROMPT.invoke({"context": search_text(standalone), "question": question})
        return model().invoke(prompt).content

    answer.invoke(QUESTION, config={"callbacks": [handler]})
    record = only_record(monitor, sink)
    # the standalone question shares words with one passage only; the condense step's "context" is no context
    assert (record.contexts, record.metadata["contexts_from"]) == ([EIFFEL.page_content], "prompt variable 'context'")


# ------------------------------------------------------------------- what no callback can see
def test_an_f_string_prompt_is_said_at_warning_once_and_counted_by_both(unsaid_reasons, handler, monitor, sink,
                                                                        capture_delta, caplog):
    llm = model()

    @chain
    def answer(question: str) -> str:
        return llm.invoke(f"Context: {search_text(question)}\nQuestion: {question}").content

    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        answer.invoke(QUESTION, config={"callbacks": [handler]})
        answer.invoke(QUESTION, config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert sink.records == []
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "made no record" in r.getMessage()]
    assert said == [("WARNING", "groundtrace: a LangChain turn made no record: no retrieval and no tool output; no "
                                "retriever, tool, prompt variable or step output held its contexts (an f-string "
                                "prompt?): decorate your retrieval function with @groundtrace.retrieval (docs: "
                                "troubleshooting, 'I see no scores') (said once; counted in stats())")]
    assert capture_delta() == {"roots": 2, "no_record": {"no retrieval and no tool output": 2}}
    assert monitor.stats.no_record == 2  # the Monitor agrees, for its exit summary


def test_with_retrieval_marked_the_f_string_chain_is_recorded(handler, monitor, sink):
    llm = model()
    marked_search = groundtrace.retrieval(search_documents)

    @chain
    def answer(question: str) -> str:
        return llm.invoke(f"Context: {format_documents(marked_search(question))}\nQuestion: {question}").content

    answer.invoke(QUESTION, config={"callbacks": [handler]})
    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [EIFFEL.page_content,
                                                                                    PARIS.page_content])
    assert record.metadata["contexts_from"] == "@groundtrace.retrieval 'search_documents'"
    assert record.metadata["documents"] == documents_of(EIFFEL, PARIS)


def test_a_marked_async_retrieval_in_an_async_chain(handler, monitor, sink):
    @groundtrace.retrieval
    async def lookup(query: str) -> list[Document]:
        await asyncio.sleep(0)
        return search_documents(query)

    llm = model()

    @chain
    async def answer(question: str) -> str:
        found = await lookup(question)
        return (await llm.ainvoke(f"Context: {format_documents(found[:1])}\nQuestion: {question}")).content

    asyncio.run(answer.ainvoke(QUESTION, config={"callbacks": [handler]}))
    record = only_record(monitor, sink)
    # what reached the model: the first document; the other was retrieved and set aside
    assert record.contexts == [EIFFEL.page_content]
    assert record.metadata["unused_contexts"] == [{"kind": "document", "name": "@groundtrace.retrieval 'lookup'",
                                                   "id": PARIS.id}]


def test_a_model_called_by_hand_after_a_marked_retrieval_is_a_turn(handler, monitor, sink, capture_delta):
    marked_search = groundtrace.retrieval(search_documents)
    found = marked_search(QUESTION)
    model().invoke(f"Context: {format_documents(found)}\n\nQuestion: {QUESTION}", config={"callbacks": [handler]})
    model().invoke("And a model call with no retrieval before it is nobody's turn", config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert (record.question, record.answer, record.contexts) == (QUESTION, ANSWER, [EIFFEL.page_content,
                                                                                    PARIS.page_content])
    assert record.metadata["question_from"] == "query"  # the filled prompt is no question: the retrieval's query is
    assert capture_delta() == {"roots": 1, "recorded": 1}


def test_instrument_finds_a_marked_retrieval_inside_a_chain(sink):
    monitor = instrument(metrics=["lexical"], sinks=[sink])
    try:
        marked_search = groundtrace.retrieval(search_text)
        llm = model()
        (RunnableLambda(lambda q: llm.invoke(f"Notes: {marked_search(q)}\nQ: {q}").content, name="answer")
         .invoke(QUESTION))
        assert monitor.flush(10)
    finally:
        uninstrument()
    [record] = sink.records
    assert (record.contexts, record.metadata["contexts_from"]) == ([JOINED], "@groundtrace.retrieval 'search_text'")


def test_a_turn_block_around_a_captured_chain_leaves_one_record(handler, monitor, sink):
    before = explicit.stats()
    with groundtrace.turn(QUESTION, monitor=monitor) as turn:
        turn.answer = strings_chain().invoke(QUESTION, config={"callbacks": [handler]})

    record = only_record(monitor, sink)
    assert record.metadata["source"] == "langchain"
    after = explicit.stats()
    assert (after.roots - before.roots, after.not_turns - before.not_turns, after.recorded - before.recorded) == (1, 1, 0)


def test_a_chain_that_is_not_rag_makes_no_record_and_says_so_once(unsaid_reasons, monitor, sink, capture_delta):
    handler = GroundtraceCallbackHandler(monitor=monitor)
    greeting = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])
    (greeting | model()).invoke({"question": "Hello!"}, config={"callbacks": [handler]})
    assert monitor.flush(10)
    assert sink.records == []
    assert capture_delta() == {"roots": 1, "no_record": {"no retrieval and no tool output": 1}}


def test_a_marked_retrieval_with_no_text_inside_a_chain_gives_error_scores_not_a_verdict(monitor, sink):
    """A retrieval function that returns the vector database's hits with no text field, called in a chain: the
    record says why it has no contexts, and the metric's Score is an error saying so."""

    class Hit:
        score = 0.9

    @groundtrace.retrieval
    def hits(question: str) -> list[Hit]:
        return [Hit(), Hit()]

    rag = RunnableLambda(lambda q: {"context": hits(q), "question": q}) | RunnableLambda(
        lambda state: f"Question: {state['question']}") | model() | StrOutputParser()
    rag.invoke(QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]})
    assert monitor.flush(10)
    [(record, [score])] = sink.emitted
    assert record.contexts == [] and score.error == (
        "no contexts to check the answer against: @groundtrace.retrieval 'hits' returned 2 item(s) of type Hit with "
        "no text")


class SearchState(TypedDict, total=False):
    question: str
    search_results: str
    answer: str


def test_a_state_key_the_app_names_holds_the_contexts(monitor, sink, monkeypatch):
    """"search_results" is no word groundtrace knows: named with context_keys= (or GROUNDTRACE_CONTEXT_KEYS), the
    graph's text under it is the record's contexts."""
    from groundtrace.capture import carried

    monkeypatch.setattr(carried, "_named_by_app", set())  # process-wide: this test's names only
    monkeypatch.setattr(carried, "_NAMES", {})
    llm = model()

    def generate(state: SearchState) -> dict[str, str]:
        return {"answer": llm.invoke(f"Context:\n{state['search_results']}\n\nQuestion: {state['question']}").content}

    app = graph(SearchState, lambda state: {"search_results": search_text(state["question"])}, generate)
    app.invoke({"question": QUESTION}, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]})
    assert monitor.flush(10) and sink.records == []  # not a context-like word: no record, said at WARNING
    app.invoke({"question": QUESTION}, config={"callbacks": [
        GroundtraceCallbackHandler(monitor=monitor, context_keys=["search_results"])]})
    record = only_record(monitor, sink)
    assert (record.contexts, record.metadata["contexts_from"]) == ([JOINED], "output 'search_results' of 'LangGraph'")


def test_the_environment_names_context_keys_too(monkeypatch):
    from groundtrace.capture import carried

    monkeypatch.setattr(carried, "_named_by_app", set())
    monkeypatch.setattr(carried, "_NAMES", {})
    monkeypatch.setattr(carried, "_env_read", False)
    monkeypatch.setenv("GROUNDTRACE_CONTEXT_KEYS", "search_results, hits")
    assert carried.is_context_name("hits") and carried.is_context_name("search_results")
    assert not carried.is_context_name("answers")


def test_instrument_takes_context_keys_too(monkeypatch):
    from groundtrace.capture import carried

    monkeypatch.setattr(carried, "_named_by_app", set())
    monkeypatch.setattr(carried, "_NAMES", {})
    instrument(metrics=["lexical"], sinks="none", context_keys=["search_hits"])
    try:
        assert carried.is_context_name("search_hits")
    finally:
        uninstrument()
