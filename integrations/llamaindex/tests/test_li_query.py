"""Query engines and hand-written roots: one Record per root with the question, the contexts it
was answered from, the answer and the nodes; scored by a real Monitor with the lexical metric."""

from __future__ import annotations

import asyncio

import pytest
from groundtrace import get_metric
from li_support import (
    ANSWER,
    CONTEXTS,
    DORM_RU,
    QUESTION,
    TOP_K,
    ScriptedLLM,
    assert_nothing_left,
    assert_the_record,
    build_index,
    expected_nodes,
    our_span_handler,
)
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor

dispatcher = get_dispatcher(__name__)


def test_query_gives_one_record_with_the_question_contexts_answer_and_nodes(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    response = engine.query(QUESTION)

    assert str(response) == ANSWER
    assert instrumented.flush(10)
    [(record, scores)] = sink.rows
    assert record.id.startswith("RetrieverQueryEngine.query-")
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert record.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert (record.trace_id, record.span_id, record.trace_links) == (None, None, {})  # no OpenTelemetry here
    [score] = scores
    expected_value = get_metric("lexical").score(record).value
    assert (score.metric, score.value, score.hallucinated) == ("lexical", expected_value, False)
    assert score.value == pytest.approx(0.70, abs=0.005)
    stats = instrumented.stats
    assert (stats.submitted, stats.scored, stats.failed, stats.excluded) == (1, 1, 0, 0)
    assert_nothing_left()


def test_aquery_gives_the_same_record(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    response = asyncio.run(engine.aquery(QUESTION))

    assert str(response) == ANSWER
    assert_the_record(instrumented, sink, "RetrieverQueryEngine.aquery")


@dispatcher.span
def answer_by_hand(question: str, retriever, llm) -> str:
    # a pipeline of the application's own, made one root by the decorator; it retrieves twice
    nodes = retriever.retrieve(question) + retriever.retrieve(question)
    context = "\n".join(node.node.get_content() for node in nodes)
    return llm.complete(f"{context}\nQuery: {question}\nAnswer:").text


def test_a_decorated_function_is_one_root_and_a_node_retrieved_twice_counts_once(index, instrumented, sink):
    answer = answer_by_hand(QUESTION, index.as_retriever(similarity_top_k=TOP_K), ScriptedLLM())

    assert answer == ANSWER
    assert_the_record(instrumented, sink, "answer_by_hand")


@dispatcher.span
def answer_as_a_dict(question: str, retriever, llm) -> dict:
    nodes = retriever.retrieve(question)
    context = "\n".join(node.node.get_content() for node in nodes)
    reply = llm.chat([ChatMessage(role="user", content=f"{context}\nQuery: {question}\nAnswer:")])
    return {"text": reply.message.content, "sources": len(nodes)}


def test_a_root_whose_result_is_no_text_takes_its_answer_from_the_last_llm_call(index, instrumented, sink):
    result = answer_as_a_dict(QUESTION, index.as_retriever(similarity_top_k=TOP_K), ScriptedLLM())

    assert result == {"text": ANSWER, "sources": 2}
    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)


@dispatcher.span
def ask_several(engine, questions: list[str], open_spans: list[int]) -> None:
    for question in questions:
        engine.query(question)
        open_spans.append(our_span_handler().tracker.tracked_spans)


def test_a_long_root_holds_only_its_open_spans_and_pairs_its_last_answer_with_its_question(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(echo_query=True), similarity_top_k=TOP_K)
    questions = [f"Вопрос {i}?" for i in range(30)]
    open_spans: list[int] = []

    ask_several(engine, questions, open_spans)

    assert open_spans == [1] * len(questions)  # the root itself, after each query has ended
    assert instrumented.flush(10)
    [record] = sink.records  # one root, one Record: its last answer, to the question it answered
    assert (record.question, record.answer, record.contexts) == ("Вопрос 29?", "Answer to: Вопрос 29?", CONTEXTS)
    assert_nothing_left()


class KeepRussian(BaseNodePostprocessor):
    def _postprocess_nodes(self, nodes, query_bundle=None):
        return [node for node in nodes if node.node.metadata["lang"] == "ru"]


def test_contexts_are_the_nodes_the_answer_was_written_from(index, instrumented, sink):
    """A postprocessor dropped a retrieved node: the LLM never saw it, so it is no context."""
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K, node_postprocessors=[KeepRussian()])

    engine.query(QUESTION)

    assert instrumented.flush(10)
    [record] = sink.records
    assert record.contexts == [DORM_RU]
    # the dropped node is named beside the Record (no text): retrieved, never read
    assert record.metadata == {"nodes": expected_nodes(pytest.approx(1.0))[1:],
                               "unused_contexts": [{"kind": "document", "id": "dorm-en#0"}]}


def test_calls_without_a_question_and_an_answer_are_not_requests(instrumented, sink):
    index = build_index()  # embeddings and node parsing: roots with neither
    index.as_retriever(similarity_top_k=TOP_K).retrieve(QUESTION)  # a question, no answer
    ScriptedLLM().complete("Say something")  # an answer, no question

    assert instrumented.flush(10)
    assert instrumented.stats.submitted == 0
    assert sink.rows == []
    assert_nothing_left()
