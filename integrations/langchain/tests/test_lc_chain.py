"""The handler on LCEL chains: every invocation mode, nesting, errors, exclusion, sampling."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator, Mapping

import pytest
from groundtrace.monitor import Monitor
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.tools import tool

from groundtrace_langchain import GroundtraceCallbackHandler
from groundtrace_langchain.collector import COLLECTOR
from lc_app import (
    BY_ID,
    CORPUS,
    GROUNDED_ANSWER,
    PROMPT,
    CollectingSink,
    KeywordRetriever,
    format_documents,
    nested_chain,
    rag_chain,
)

QUESTION = "What is the capital of France?"
PARIS = BY_ID["en-paris"]


def expected_record_fields(run_id: uuid.UUID, question: str, documents: list[Document], answer: str,
                           run_name: str = "RunnableSequence") -> dict:
    return {
        "id": str(run_id),
        "question": question,
        "queries": None,  # the retriever's query is the question itself: nothing was derived
        "contexts": [d.page_content for d in documents],
        "answer": answer,
        "reference": None,
        "language": None,
        "metadata": {
            "source": "langchain",
            "run_name": run_name,
            "tags": [],
            "run_metadata": {},
            "documents": [{"id": d.id, "source": d.metadata.get("source"), "metadata": d.metadata} for d in documents],
        },
        "trace_id": None,
        "span_id": None,
        "run_id": str(run_id),
        "session_id": None,  # a chain run with no thread, session or groundtrace.session
        "trace_links": {},
    }


def assert_grounded_score(sink: CollectingSink) -> None:
    [(_, scores)] = sink.emitted
    [score] = scores
    assert (score.metric, score.value, score.hallucinated, score.error) == ("lexical", 1.0, False, None)


def test_invoke_submits_one_record_with_exact_fields_and_it_is_scored(handler, monitor, sink, capture_delta):
    run_id = uuid.uuid4()
    answer = rag_chain().invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id})

    assert answer == GROUNDED_ANSWER
    assert monitor.flush(10)
    [record] = sink.records
    assert record.model_dump() == expected_record_fields(run_id, QUESTION, [PARIS], GROUNDED_ANSWER)
    assert_grounded_score(sink)
    assert (monitor.stats.submitted, monitor.stats.scored) == (1, 1)
    assert capture_delta() == {"roots": 1, "recorded": 1}


def test_russian_question_gets_russian_passage(handler, monitor, sink):
    question = "Какой город — столица России?"
    rag_chain(answer="Москва — столица России.").invoke(question, config={"callbacks": [handler]})

    assert monitor.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == (question, ["Москва — столица России."],
                                                                 "Москва — столица России.")
    assert record.metadata["documents"] == [{"id": "ru-moscow", "source": "russia.md",
                                             "metadata": {"source": "russia.md", "lang": "ru"}}]
    assert sink.emitted[0][1][0].value == 1.0


def test_ainvoke(handler, monitor, sink):
    run_id = uuid.uuid4()
    answer = asyncio.run(rag_chain().ainvoke(QUESTION, config={"callbacks": [handler], "run_id": run_id}))

    assert answer == GROUNDED_ANSWER
    assert monitor.flush(10)
    assert [r.model_dump() for r in sink.records] == [expected_record_fields(run_id, QUESTION, [PARIS], GROUNDED_ANSWER)]
    assert_grounded_score(sink)


def test_stream_delivers_the_whole_answer_once_the_stream_ends(handler, monitor, sink):
    run_id = uuid.uuid4()
    chunks = list(rag_chain().stream(QUESTION, config={"callbacks": [handler], "run_id": run_id}))

    assert len(chunks) == len(GROUNDED_ANSWER)  # FakeListChatModel streams one character at a time
    assert monitor.flush(10)
    assert [r.model_dump() for r in sink.records] == [expected_record_fields(run_id, QUESTION, [PARIS], GROUNDED_ANSWER)]
    assert_grounded_score(sink)


def test_astream(handler, monitor, sink):
    run_id = uuid.uuid4()

    async def consume() -> list[str]:
        return [chunk async for chunk in rag_chain().astream(QUESTION, config={"callbacks": [handler], "run_id": run_id})]

    assert "".join(asyncio.run(consume())) == GROUNDED_ANSWER
    assert monitor.flush(10)
    assert [r.model_dump() for r in sink.records] == [expected_record_fields(run_id, QUESTION, [PARIS], GROUNDED_ANSWER)]


QUESTIONS = {
    "What is the capital of France?": ("en-paris", "Paris is the capital of France."),
    "When was the Eiffel Tower completed?": ("en-eiffel", "The Eiffel Tower in Paris was completed in 1889."),
    "Какой город — столица России?": ("ru-moscow", "Москва — столица России."),
    "Какое озеро самое глубокое?": ("ru-baikal", "Байкал — самое глубокое озеро в мире."),
}


def assert_one_record_per_question(sink: CollectingSink) -> None:
    records = sink.by_question()
    assert len(sink.records) == len(QUESTIONS) == len(records)
    for question, (doc_id, _) in QUESTIONS.items():
        record = records[question]
        assert record.contexts == [BY_ID[doc_id].page_content]
        assert record.answer == GROUNDED_ANSWER
        assert record.run_id == record.id and uuid.UUID(record.run_id)
    assert len({r.run_id for r in sink.records}) == len(QUESTIONS)


def test_batch_makes_one_record_per_input(handler, monitor, sink):
    assert rag_chain().batch(list(QUESTIONS), config={"callbacks": [handler]}) == [GROUNDED_ANSWER] * len(QUESTIONS)
    assert monitor.flush(10)
    assert_one_record_per_question(sink)


def test_abatch_makes_one_record_per_input(handler, monitor, sink):
    asyncio.run(rag_chain().abatch(list(QUESTIONS), config={"callbacks": [handler]}))
    assert monitor.flush(10)
    assert_one_record_per_question(sink)


def test_with_config_attaches_the_handler_to_every_call(handler, monitor, sink):
    chain = rag_chain().with_config(callbacks=[handler])
    chain.invoke(QUESTION)
    chain.invoke("Какой город — столица России?")

    assert monitor.flush(10)
    assert [(r.question, r.contexts) for r in sink.records] == [
        (QUESTION, [PARIS.page_content]),
        ("Какой город — столица России?", ["Москва — столица России."]),
    ]


def test_nested_chain_is_part_of_the_outer_root_and_contexts_merge_in_order(handler, monitor, sink):
    inner = rag_chain(retriever=KeywordRetriever(documents=CORPUS, k=2))
    background = KeywordRetriever(documents=[BY_ID["en-paris"], BY_ID["ru-moscow"]], k=1)
    run_id = uuid.uuid4()
    outer = nested_chain(inner, background)

    answer = outer.invoke({"question": "Paris: when was the Eiffel Tower completed?"},
                          config={"callbacks": [handler], "run_id": run_id})

    assert answer == GROUNDED_ANSWER
    assert monitor.flush(10)
    [record] = sink.records
    # background retrieval first (Paris), then the inner chain's (Eiffel, then Paris again: dropped)
    assert record.contexts == [BY_ID["en-paris"].page_content, BY_ID["en-eiffel"].page_content]
    assert [d["id"] for d in record.metadata["documents"]] == ["en-paris", "en-eiffel"]
    assert (record.run_id, record.question) == (str(run_id), "Paris: when was the Eiffel Tower completed?")


def test_a_handler_on_an_inner_chain_only_records_the_inner_chain(handler, monitor, sink):
    inner = rag_chain().with_config(callbacks=[handler], run_name="inner_rag")
    outer = nested_chain(inner, KeywordRetriever(documents=[BY_ID["ru-moscow"]], k=1))

    outer.invoke({"question": QUESTION})

    assert monitor.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.metadata["run_name"]) == (
        QUESTION, [PARIS.page_content], "inner_rag")


def test_a_root_that_raises_is_not_scored_and_leaks_nothing(handler, monitor, sink, capture_delta, caplog):
    def fail(_: object) -> str:
        raise ValueError("the model is down")

    chain = rag_chain() | RunnableLambda(fail)
    caplog.set_level(logging.DEBUG, logger="groundtrace.langchain")
    run_id = uuid.uuid4()

    with pytest.raises(ValueError, match="the model is down"):
        chain.invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id})

    assert monitor.flush(10)
    assert sink.emitted == [] and monitor.stats.submitted == 0
    assert capture_delta() == {"roots": 1, "failed": 1}
    assert COLLECTOR.tracked_runs() == 0
    assert f"root run {run_id} (RunnableSequence) raised ValueError: nothing is scored" in caplog.text


def test_a_failure_caught_inside_the_chain_still_records_the_root(handler, monitor, sink):
    def fail(_: object) -> str:
        raise RuntimeError("primary model down")

    failing = rag_chain() | RunnableLambda(fail)

    def answer_with_fallback(question: str) -> str:
        try:
            return failing.invoke(question)
        except RuntimeError:
            return rag_chain().invoke(question)

    # (not .with_fallbacks: langchain-core 1.7.2 starts its attempts as separate root runs)
    run_id = uuid.uuid4()
    answer = RunnableLambda(answer_with_fallback).invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id})

    assert answer == GROUNDED_ANSWER
    assert monitor.flush(10)
    [record] = sink.records
    # both attempts retrieved the same passage: it counts once
    assert (record.run_id, record.answer, record.contexts) == (str(run_id), GROUNDED_ANSWER, [PARIS.page_content])


def test_an_abandoned_stream_ends_its_root_and_leaks_nothing(handler, monitor, sink, capture_delta):
    stream: Iterator[str] = rag_chain().stream(QUESTION, config={"callbacks": [handler]})
    assert next(stream) == "P"
    stream.close()  # LangChain ends the root normally, with no output yet, and the model after it

    assert monitor.flush(10)
    assert sink.emitted == []
    assert capture_delta() == {"roots": 1, "no_record": {"no answer": 1}}


def test_metadata_exclusion_is_counted_by_the_monitor_and_never_scored(handler, monitor, sink, capture_delta):
    run_id = uuid.uuid4()
    rag_chain().invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id,
                                         "metadata": {"groundtrace_exclude": True, "user": "u1"}})

    assert monitor.flush(10)
    assert sink.emitted == []
    stats = monitor.stats
    assert (stats.submitted, stats.excluded, stats.scored) == (1, 1, 0)
    assert capture_delta() == {"roots": 1, "recorded": 1, "excluded": 1}  # recorded, marked excluded


def test_run_metadata_and_tags_of_the_root_travel_in_the_record(handler, monitor, sink):
    rag_chain().invoke(QUESTION, config={"callbacks": [handler], "tags": ["staging"],
                                         "metadata": {"user": "u1", "attempt": 2, "client": object()}})
    assert monitor.flush(10)
    [record] = sink.records
    assert record.metadata["tags"] == ["staging"]
    assert record.metadata["run_metadata"] == {"user": "u1", "attempt": 2}  # non-scalars are left out


def test_answer_falls_back_to_the_last_llm_generation(handler, monitor, sink):
    chain = rag_chain(answer="Paris.") | RunnableLambda(lambda text: {"reply_length": len(text)})
    chain.invoke(QUESTION, config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert sink.records[0].answer == "Paris."


def test_streamed_chain_without_retriever_reads_question_and_contexts_from_its_deferred_input(handler, monitor, sink):
    prompt = ChatPromptTemplate.from_messages([("system", "{documents}"), ("human", "{question}")])
    chain = prompt | FakeListChatModel(responses=[GROUNDED_ANSWER]) | StrOutputParser()

    "".join(chain.stream({"question": QUESTION, "documents": [PARIS]}, config={"callbacks": [handler]}))

    assert monitor.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == (QUESTION, [PARIS.page_content], GROUNDED_ANSWER)


def test_runs_that_retrieve_nothing_make_no_record(handler, monitor, sink, capture_delta):
    (PROMPT | FakeListChatModel(responses=["hi"])).invoke({"context": "", "question": "hello"},
                                                          config={"callbacks": [handler]})
    KeywordRetriever(documents=CORPUS).invoke("Paris", config={"callbacks": [handler]})  # a standalone retriever
    FakeListChatModel(responses=["hi"]).invoke("hello", config={"callbacks": [handler]})  # a standalone model

    assert monitor.flush(10)
    assert sink.emitted == []
    assert capture_delta() == {"roots": 1, "no_record": {"no retrieval and no tool output": 1}}


def test_a_retriever_that_found_nothing_still_records_an_ungrounded_answer(handler, monitor, sink):
    rag_chain(answer="Berlin hosts wonderful zeppelins.").invoke("zzzz nothing matches", config={"callbacks": [handler]})

    assert monitor.flush(10)
    [(record, [score])] = sink.emitted
    assert (record.contexts, record.metadata["documents"]) == ([], [])
    assert (score.value, score.hallucinated) == (0.0, True)


def test_sample_rate_in_front_of_a_given_monitor(monitor, sink, capture_delta):
    rag_chain().invoke(QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor, sample_rate=0.0)]})
    rag_chain().invoke(QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor, sample_rate=1.0)]})

    assert monitor.flush(10)
    assert len(sink.records) == 1
    assert (monitor.stats.submitted, monitor.stats.sampled_out) == (2, 1)  # the Monitor samples
    assert capture_delta() == {"roots": 2, "recorded": 2}


def test_an_owned_monitor_gets_metrics_sinks_options_and_sample_rate():
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[sink], sample_rate=0.25, queue_size=7,
                                         flush_at_exit=False)
    try:
        assert handler.owns_monitor
        assert [m.name for m in handler.monitor.metrics] == ["lexical"]
        assert handler.monitor.sinks == [sink]
        assert handler.monitor.sample_rate == 0.25
        assert handler.monitor._queue.maxsize == 7
    finally:
        handler.close()


def test_constructor_rejects_ambiguous_or_invalid_options(monitor):
    with pytest.raises(ValueError, match="either monitor= or the options"):
        GroundtraceCallbackHandler(metrics=["lexical"], monitor=monitor)
    with pytest.raises(ValueError, match="sample_rate must lie in"):
        GroundtraceCallbackHandler(monitor=monitor, sample_rate=1.5)


def test_without_monitor_or_options_the_shared_monitor_is_used_lazily(monkeypatch, tmp_path):
    from groundtrace.capture import kit as capture

    monkeypatch.chdir(tmp_path)  # no sink configured: the default store is written here, not in the checkout
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")
    monkeypatch.delenv("GROUNDTRACE_SINKS", raising=False)
    capture.reset_shared_monitor()
    try:
        handler = GroundtraceCallbackHandler()
        assert capture._shared is None  # nothing built before the first record
        rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
        assert handler.monitor is capture.shared_monitor()
        assert handler.monitor.flush(10) and handler.monitor.stats.scored == 1
    finally:
        capture.reset_shared_monitor()


class ExplodingOutput(Mapping):
    """A chain output whose reading fails: the handler's own bug, from LangChain's point of view."""

    def __getitem__(self, key):
        raise RuntimeError("cannot read me")

    def __iter__(self):
        return iter(["answer"])

    def __len__(self):
        return 1

    def get(self, key, default=None):
        raise RuntimeError("cannot read me")


def test_a_failing_callback_never_reaches_the_application(handler, monitor, sink, capture_delta, caplog):
    chain = rag_chain() | RunnableLambda(lambda _: ExplodingOutput())
    with caplog.at_level(logging.WARNING):
        result = chain.invoke(QUESTION, config={"callbacks": [handler]})

    assert isinstance(result, ExplodingOutput)
    assert monitor.flush(10)
    assert sink.emitted == []
    assert capture_delta() == {"roots": 1, "callback_errors": 1,
                               "no_record": {"groundtrace failed to read it": 1}}
    assert "groundtrace: LangChain: on_chain_end failed" in caplog.text
    # LangChain would log "Error in GroundtraceCallbackHandler..." had the error reached it
    assert "Error in GroundtraceCallbackHandler" not in caplog.text


def test_two_handlers_on_one_run_each_get_their_record(monitor, sink):
    other_sink = CollectingSink()
    with Monitor(metrics=["lexical"], sinks=[other_sink], flush_at_exit=False) as other:
        handlers = [GroundtraceCallbackHandler(monitor=monitor), GroundtraceCallbackHandler(monitor=other)]
        rag_chain().invoke(QUESTION, config={"callbacks": handlers})
        assert monitor.flush(10) and other.flush(10)
        assert [r.run_id for r in sink.records] == [r.run_id for r in other_sink.records]
        assert len(sink.records) == 1


def test_a_retriever_inside_a_tool_reports_to_the_root(handler, monitor, sink):
    retriever = KeywordRetriever(documents=CORPUS, k=1)

    @tool
    def search_passages(query: str) -> str:
        """Search the passages."""
        return format_documents(retriever.invoke(query))

    chain = (
        {"context": search_passages, "question": RunnablePassthrough()}
        | PROMPT
        | FakeListChatModel(responses=[GROUNDED_ANSWER])
        | StrOutputParser()
    )
    chain.invoke(QUESTION, config={"callbacks": [handler]})

    assert monitor.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == (QUESTION, [PARIS.page_content], GROUNDED_ANSWER)


def test_astream_events(handler, monitor, sink):
    run_id = uuid.uuid4()

    async def consume() -> list[str]:
        return [event["event"] async for event in rag_chain().astream_events(
            QUESTION, version="v2", config={"callbacks": [handler], "run_id": run_id})]

    events = asyncio.run(consume())
    assert events[0] == "on_chain_start" and events[-1] == "on_chain_end"
    assert monitor.flush(10)
    assert [r.model_dump() for r in sink.records] == [expected_record_fields(run_id, QUESTION, [PARIS], GROUNDED_ANSWER)]
