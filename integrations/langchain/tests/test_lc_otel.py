"""OpenTelemetry with the real SDK: scores land as EVALUATOR spans in the trace of the request."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from groundtrace import trace_context
from groundtrace.sinks.otel import OTelSink
from langchain_core.runnables import RunnableLambda

from groundtrace_langchain import GroundtraceCallbackHandler
from lc_app import BY_ID, GROUNDED_ANSWER, CollectingSink, rag_chain, rag_graph

QUESTION = "What is the capital of France?"


def handler_with_otel(provider) -> tuple[GroundtraceCallbackHandler, CollectingSink]:
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[OTelSink(tracer_provider=provider), sink],
                                         flush_at_exit=False)
    return handler, sink


def spans_named(exporter, name: str) -> list:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def assert_evaluation_span(span, trace_id: int, parent_span_id: int) -> None:
    assert span.context.trace_id == trace_id
    assert span.parent is not None and span.parent.span_id == parent_span_id
    assert span.attributes["openinference.span.kind"] == "EVALUATOR"
    assert span.attributes["gen_ai.evaluation.name"] == "lexical"
    assert span.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert span.attributes["gen_ai.evaluation.score.label"] == "grounded"
    [event] = span.events
    assert event.name == "gen_ai.evaluation.result"
    assert event.attributes["gen_ai.evaluation.name"] == "lexical"
    assert event.attributes["gen_ai.evaluation.score.value"] == 1.0


def test_scores_become_children_of_the_applications_request_span(span_exporter):
    provider, exporter = span_exporter
    handler, sink = handler_with_otel(provider)
    tracer = provider.get_tracer("app")

    with tracer.start_as_current_span("request") as request:
        assert rag_chain().invoke(QUESTION, config={"callbacks": [handler]}) == GROUNDED_ANSWER
    assert handler.monitor.flush(10)
    handler.close()

    request_context = request.get_span_context()
    [evaluation] = spans_named(exporter, "groundtrace.lexical")
    assert_evaluation_span(evaluation, request_context.trace_id, request_context.span_id)
    [record] = sink.records
    assert (record.trace_id, record.span_id) == (format(request_context.trace_id, "032x"),
                                                 format(request_context.span_id, "016x"))
    assert spans_named(exporter, "invoke_workflow RunnableSequence") == []  # the application's span was used


def test_async_and_batched_runs_keep_the_request_span(span_exporter):
    provider, exporter = span_exporter
    handler, sink = handler_with_otel(provider)
    tracer = provider.get_tracer("app")

    async def serve() -> None:
        with tracer.start_as_current_span("request"):
            await rag_graph().ainvoke({"question": QUESTION}, config={"callbacks": [handler]})

    asyncio.run(serve())
    with tracer.start_as_current_span("batch request") as batch_request:
        rag_chain().batch([QUESTION, "Paris, capital of France?"], config={"callbacks": [handler]})
    assert handler.monitor.flush(10)
    handler.close()

    [request] = spans_named(exporter, "request")
    graph_record, *batch_records = sink.records
    assert graph_record.span_id == format(request.context.span_id, "016x")
    batch_context = batch_request.get_span_context()
    assert {(r.trace_id, r.span_id) for r in batch_records} == {
        (format(batch_context.trace_id, "032x"), format(batch_context.span_id, "016x"))}
    assert len(spans_named(exporter, "groundtrace.lexical")) == 3


def test_without_an_application_span_the_adapter_starts_its_own_request_span(global_tracer_provider):
    provider, exporter = global_tracer_provider
    handler, sink = handler_with_otel(provider)
    run_id = uuid.uuid4()

    rag_chain().invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id})
    assert handler.monitor.flush(10)
    handler.close()

    [request] = spans_named(exporter, "invoke_workflow RunnableSequence")  # GenAI's name for a framework's run
    assert request.parent is None and request.status.is_ok
    assert dict(request.attributes) == {"openinference.span.kind": "CHAIN", "groundtrace.run_id": str(run_id),
                                        "gen_ai.operation.name": "invoke_workflow",
                                        "gen_ai.workflow.name": "RunnableSequence"}
    [evaluation] = spans_named(exporter, "groundtrace.lexical")
    assert_evaluation_span(evaluation, request.context.trace_id, request.context.span_id)
    [record] = sink.records
    assert (record.trace_id, record.span_id) == (format(request.context.trace_id, "032x"),
                                                 format(request.context.span_id, "016x"))


def test_the_adapters_request_span_of_a_failed_run_ends_with_error_status(global_tracer_provider):
    provider, exporter = global_tracer_provider
    handler, sink = handler_with_otel(provider)

    def fail(_: object) -> str:
        raise ValueError("model down")

    with pytest.raises(ValueError):
        (rag_chain() | RunnableLambda(fail)).invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.monitor.flush(10)
    handler.close()

    [request] = spans_named(exporter, "invoke_workflow RunnableSequence")
    assert (request.status.is_ok, request.status.description) == (False, "ValueError: model down")
    assert spans_named(exporter, "groundtrace.lexical") == [] and sink.records == []


def test_an_excluded_run_starts_no_span(global_tracer_provider):
    provider, exporter = global_tracer_provider
    handler, _ = handler_with_otel(provider)

    rag_chain().invoke(QUESTION, config={"callbacks": [handler], "metadata": {"groundtrace_exclude": True}})
    assert handler.monitor.flush(10)
    handler.close()

    assert exporter.get_finished_spans() == ()
    assert handler.monitor.stats.excluded == 1


@pytest.fixture
def link_provider():
    """A link provider whose value the chain can change mid-run (core offers no unregister)."""
    values: dict[str, str] = {}
    trace_context.register_link_provider("test_tool", lambda: values.get("test_tool"))
    trace_context.register_link_provider("test_late", lambda: values.get("test_late"))
    yield values
    trace_context.unregister_link_provider("test_tool")
    trace_context.unregister_link_provider("test_late")


def test_trace_links_read_at_the_start_win_and_the_end_adds_new_ones(handler, monitor, sink, link_provider):
    def during_the_run(answer: str) -> str:
        link_provider["test_tool"] = "changed-later"
        link_provider["test_late"] = "created-during-the-run"
        return answer

    link_provider["test_tool"] = "at-start"
    (rag_chain() | RunnableLambda(during_the_run)).invoke(QUESTION, config={"callbacks": [handler]})

    assert monitor.flush(10)
    assert sink.records[0].trace_links == {"test_tool": "at-start", "test_late": "created-during-the-run"}
    assert sink.records[0].contexts == [BY_ID["en-paris"].page_content]


def test_the_event_is_a_log_record_on_the_request_span_naming_the_providers_reply_id(span_exporter):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    provider, exporter = span_exporter
    events, logger_provider = InMemoryLogRecordExporter(), LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(events))
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(
        metrics=["lexical"], sinks=[OTelSink(tracer_provider=provider, logger_provider=logger_provider), sink],
        flush_at_exit=False)
    # a chat model that answers as OpenAI's does: the provider's id of the reply in its response metadata
    reply = AIMessage(content=GROUNDED_ANSWER, response_metadata={"id": "chatcmpl-A1b2C3"})
    llm = GenericFakeChatModel(messages=iter([reply]))

    with provider.get_tracer("app").start_as_current_span("request") as request:
        assert rag_chain(llm=llm).invoke(QUESTION, config={"callbacks": [handler]}) == GROUNDED_ANSWER
    assert handler.monitor.flush(10)
    handler.close()

    [record] = sink.records
    assert record.metadata["response_id"] == "chatcmpl-A1b2C3"
    [event] = [finished.log_record for finished in events.get_finished_logs()]
    context = request.get_span_context()
    assert (event.event_name, event.trace_id, event.span_id) == ("gen_ai.evaluation.result", context.trace_id,
                                                                 context.span_id)
    assert event.attributes["gen_ai.response.id"] == "chatcmpl-A1b2C3"
    [carrier] = spans_named(exporter, "groundtrace.lexical")
    assert [link.context.span_id for link in carrier.links] == [context.span_id] and carrier.events == ()
