"""The one assembler, on hand-written span shapes: what OpenInference writes for LangChain and
LlamaIndex, serialised LangChain messages and documents, LlamaIndex NodeWithScore dicts, GenAI
messages, and the broken and empty values a real export also holds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceFilter, SourceStats
from groundtrace.sources.openinference import span_metadata, span_view
from groundtrace.sources.platforms import metadata_session
from groundtrace.sources.spans import (
    NO_ANSWER, NO_RETRIEVAL, ONLY_EVALUATIONS, Document, SpanView, answer_of, assemble, documents_of, question_of,
    records_from_traces)

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(span_id: str, kind: str, parent: str | None = None, at: int = 0, **fields) -> SpanView:
    return SpanView(trace_id=fields.pop("trace_id", TRACE), span_id=span_id, parent_id=parent, kind=kind,
                    start_time=T0 + timedelta(milliseconds=at), **fields)


def lc_message(kind: str, content: str) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind],
            "kwargs": {"content": content, "type": kind.removesuffix("Message").lower()}}


# ------------------------------------------------------------------------------ question_of
@pytest.mark.parametrize("value, question", [
    ("What is the capital of France?", "What is the capital of France?"),
    ('{"question": "Where is the Eiffel Tower?", "chat_history": []}', "Where is the Eiffel Tower?"),  # LangChain dict input
    ({"input": "Привет, где Москва?"}, "Привет, где Москва?"),
    ('{"query_bundle": {"query_str": "Сколько стоит общежитие?", "embedding": null}}', "Сколько стоит общежитие?"),
    (json.dumps({"messages": [[lc_message("SystemMessage", "Answer briefly."),
                               lc_message("HumanMessage", "Who built it?")]]}), "Who built it?"),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Why?"}]}], "Why?"),
    ('[{"role": "user", "parts": [{"type": "text", "content": "GenAI question"}]}]', "GenAI question"),
    ("[urgent] why is the sky blue?", "[urgent] why is the sky blue?"),
])
def test_question_of_the_shapes_apps_log(value, question) -> None:
    assert question_of(value) == question


@pytest.mark.parametrize("value", [
    None, "", "   ", {}, [], '{"question": "cut by a length lim', '{"question": }', "[1, 2", "[not, json]",
    {"question": ""}, {"a": "one", "b": "two"}, [{"role": "assistant", "content": "only the model spoke"}],
])
def test_no_question_is_guessed_from_broken_or_empty_values(value) -> None:
    assert question_of(value) is None


# ------------------------------------------------------------------------------ answer_of
@pytest.mark.parametrize("value, answer", [
    ("Paris.", "Paris."),
    ('{"answer": "Paris.", "question": "Where?", "documents": []}', "Paris."),  # a LangGraph state
    ('{"response": "1 879 рублей.", "source_nodes": ["<NodeWithScore(...)>"]}', "1 879 рублей."),  # LlamaIndex _query
    (json.dumps({"type": "ai", "data": {"content": "Built in 1889.", "type": "ai"}}), "Built in 1889."),  # an AIMessage
    ({"choices": [{"message": {"role": "assistant", "content": "OpenAI shaped."}}]}, "OpenAI shaped."),
    ('[{"role": "assistant", "parts": [{"type": "text", "content": "GenAI "}, {"type": "text", "content": "answer"}]}]',
     "GenAI answer"),
])
def test_answer_of_the_shapes_apps_log(value, answer) -> None:
    assert answer_of(value) == answer


@pytest.mark.parametrize("value", [None, "", " \n", "{}", "[]", '{"answer": ""}', '{"answer": "unterminated', "{'a': 1}"])
def test_no_answer_from_broken_or_empty_values(value) -> None:
    assert answer_of(value) is None


# ------------------------------------------------------------------------------ documents_of
def test_documents_of_langchain_llamaindex_and_openinference_shapes() -> None:
    langchain = {"documents": [{"id": "en-paris", "metadata": {"source": "france.md"}, "page_content": "Paris.",
                                "type": "Document"}]}
    serialised = [{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"],
                   "kwargs": {"page_content": "Serialised.", "metadata": {"id": "s1"}}}]
    llamaindex = [{"node": {"id_": "dorm-en#0", "text": "Fee: 1,879 rubles."}, "score": 0.75}]
    openinference = [{"document": {"content": "OI.", "id": "d1", "score": 0.5}}]

    assert documents_of(json.dumps(langchain)) == [Document("Paris.", "en-paris")]
    assert documents_of(serialised) == [Document("Serialised.", "s1")]
    assert documents_of(llamaindex) == [Document("Fee: 1,879 rubles.", "dorm-en#0", 0.75)]
    assert documents_of(openinference) == [Document("OI.", "d1", 0.5)]
    assert documents_of({"nodes": ["plain text", "", 7, None]}) == [Document("plain text")]


@pytest.mark.parametrize("value", [None, "", "not json", '{"documents": [', "{}", "[]", {"documents": "x"}, 42])
def test_documents_of_nothing(value) -> None:
    assert documents_of(value) == []


# ------------------------------------------------------------------------------ span_view
def test_span_view_reads_openinference_attributes_flat_and_as_phoenix_flattens_them() -> None:
    attributes = {
        "openinference.span.kind": "RETRIEVER", "input.value": "q",
        "retrieval.documents.1.document.content": "second", "retrieval.documents.0.document.content": "first",
        "retrieval.documents.0.document.id": "d0", "retrieval.documents.0.document.score": 0.9,
        "retrieval.documents.2.document.content": "  ",  # empty: not a document
        "output.value": '["<NodeWithScore(node=TextNode(id_=d0), score=0.9)>"]',  # LlamaIndex reprs: never read
        "metadata": '{"env": "staging"}', "metadata.team": "search", "tag.tags": ["nightly"], "session.id": "s-1",
    }
    view = span_view(TRACE, "00f067aa0ba902b7", None, "retrieve", T0, attributes)
    assert (view.kind, view.documents) == ("RETRIEVER", [Document("first", "d0", 0.9), Document("second")])
    assert view.metadata == {"env": "staging", "team": "search", "tags": ["nightly"], "session.id": "s-1"}
    assert view.session_id == "s-1"
    assert span_metadata({"metadata": "not json", "tag.tags": []}) == {}


def test_span_view_falls_back_to_genai_conventions() -> None:
    view = span_view(TRACE, "a" * 16, None, "chat", T0, {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}]',
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}]'})
    assert (view.kind, question_of(view.input), answer_of(view.output)) == ("LLM", "Hi?", "Hello.")


@pytest.mark.parametrize("attributes, session", [
    ({"session.id": "s-1"}, "s-1"),  # OpenInference
    ({"gen_ai.conversation.id": "conv-9"}, "conv-9"),  # OpenTelemetry GenAI
    ({"session.id": "s-1", "gen_ai.conversation.id": "conv-9"}, "s-1"),
    ({"session.id": 42}, "42"),
    ({"session.id": ""}, None),
    ({}, None),
])
def test_span_view_reads_the_conversation_of_either_convention(attributes, session) -> None:
    assert span_view(TRACE, "a" * 16, None, "chat", T0, attributes).session_id == session


# ------------------------------------------------------------------------------ assemble
def rag_trace(**root_fields) -> list[SpanView]:
    root = dict(input='{"question": "Where is the Eiffel Tower?"}', output="In Paris.", name="RunnableSequence",
                metadata={"env": "staging"})
    root.update(root_fields)
    return [
        span("c" * 16, "LLM", "a" * 16, at=30, input="prompt", output="In Paris."),
        span("b" * 16, "RETRIEVER", "a" * 16, at=10, input="Eiffel Tower",
             documents=[Document("The Eiffel Tower is in Paris."), Document("It opened in 1889.")]),
        span("a" * 16, "CHAIN", None, at=0, **root),
        span("e" * 16, "EVALUATOR", "a" * 16, at=50, evaluation="lexical"),
    ]


def test_assemble_builds_the_record_of_the_root() -> None:
    record = assemble(rag_trace(), "otel-json:x.json")
    assert (record.id, record.trace_id, record.span_id) == (TRACE, TRACE, "a" * 16)
    assert (record.question, record.contexts, record.answer) == (
        "Where is the Eiffel Tower?", ["The Eiffel Tower is in Paris.", "It opened in 1889."], "In Paris.")
    assert record.metadata == {"env": "staging", SOURCE_KEY: "otel-json:x.json", "root_span": "RunnableSequence",
                               "started": T0.isoformat(), SCORED_KEY: ["lexical"]}


@pytest.mark.parametrize("metadata, session", [
    ({"session_id": "s", "thread_id": "t", "conversation_id": "c"}, "s"),  # LangSmith's order
    ({"thread_id": "t", "conversation_id": "c"}, "t"),
    ({"conversation_id": 12}, "12"),
    ({"session_id": "", "thread_id": "t"}, "t"),
    ({"env": "prod"}, None),
    ("not a mapping", None),
])
def test_run_metadata_names_the_conversation_by_langsmiths_thread_keys(metadata, session) -> None:
    assert metadata_session(metadata) == session


def test_the_record_takes_the_roots_conversation_else_the_first_span_naming_one() -> None:
    assert assemble(rag_trace(), "s").session_id is None
    assert assemble(rag_trace(session_id="chat-1"), "s").session_id == "chat-1"
    spans = rag_trace()
    spans[0].session_id, spans[1].session_id = "from-llm", "from-retriever"  # the retriever started first
    assert assemble(spans, "s").session_id == "from-retriever"
    assert assemble(rag_trace(session_id="chat-1"), "s", session_id="given").session_id == "given"  # the source knows better


def test_the_question_falls_back_to_the_first_retrievers_query() -> None:
    assert assemble(rag_trace(input='{"a": 1, "b": 2}'), "s").question == "Eiffel Tower"


def test_a_reranker_decides_the_contexts_and_repeats_count_once() -> None:
    spans = rag_trace() + [span("d" * 16, "RERANKER", "a" * 16, at=20,
                                documents=[Document("It opened in 1889."), Document("It opened in 1889.")])]
    assert assemble(spans, "s").contexts == ["It opened in 1889."]


@pytest.mark.parametrize("change, reason", [
    (lambda spans: [s for s in spans if s.kind != "RETRIEVER"], NO_RETRIEVAL),
    (lambda spans: [s if s.kind != "RETRIEVER" else span(s.span_id, "RETRIEVER", s.parent_id, documents=[Document(" ")])
                    for s in spans], NO_RETRIEVAL),
    (lambda spans: rag_trace(output='{"answer": "cut'), NO_ANSWER),
    (lambda spans: rag_trace(output=""), NO_ANSWER),
    (lambda spans: [s for s in spans if s.kind == "EVALUATOR"], ONLY_EVALUATIONS),
])
def test_what_is_not_a_rag_request_is_named_not_guessed(change, reason) -> None:
    assert assemble(change(rag_trace()), "s") == reason


def test_records_from_traces_filters_counts_and_limits() -> None:
    def trace(number: int, env: str) -> list[SpanView]:
        trace_id = f"{number:032x}"
        return [span(f"{number:016x}", "CHAIN", None, at=number * 1000, trace_id=trace_id, input="q", output="a",
                     metadata={"env": env}),
                span(f"{number + 100:016x}", "RETRIEVER", f"{number:016x}", at=number * 1000 + 1, trace_id=trace_id,
                     documents=[Document("doc")])]

    traces = [trace(1, "prod"), trace(2, "staging"), [span("9" * 16, "LLM", trace_id="9" * 32, at=2500, output="x",
                                                                  metadata={"env": "staging"})],
              trace(3, "staging"), trace(4, "staging")]
    stats = SourceStats()
    window = SourceFilter(since=T0 + timedelta(seconds=1), until=T0 + timedelta(seconds=4), metadata={"env": "staging"})
    records = list(records_from_traces(traces, "s", window, stats))
    assert [r.trace_id for r in records] == [f"{2:032x}", f"{3:032x}"]
    assert stats.as_dict() == {"traces": 5, "records": 2, "skipped": {"filtered out": 2, "no retrieval": 1}}

    stats = SourceStats()
    assert len(list(records_from_traces(traces, "s", SourceFilter(limit=1), stats))) == 1
    assert stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}


@pytest.mark.parametrize("metadata, tags, admitted", [
    ({"user": {"tier": "gold"}, "env": "prod"}, (), True),  # nested, as an OTLP file keeps it
    ({"user.tier": "gold", "env": "prod"}, (), True),  # flattened, as Phoenix keeps it
    ({"user": {"tier": "silver"}, "env": "prod"}, (), False),
    ({"env": "prod"}, ["user.tier:gold"], True),  # key:value tags
    ({"user": "gold", "env": "prod"}, (), False),
    ({"user": {"tier": "gold"}, "env": 1}, (), False),
    (None, (), False),
])
def test_where_filters_reach_nested_and_flattened_metadata(metadata, tags, admitted) -> None:
    assert SourceFilter(metadata={"user.tier": "gold", "env": "prod"}).admits_metadata(metadata, tags) is admitted
    assert SourceFilter(metadata={"page": "1"}).admits_metadata({"page": 1})  # compared as text
