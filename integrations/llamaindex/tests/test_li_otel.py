"""OpenTelemetry, with the real SDK: scores become EVALUATOR children of the request's span, the
application's own span when one is current, a tracer's span of the query (OpenInference), or else the adapter's
"invoke_workflow {root}" span."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

trace = pytest.importorskip("opentelemetry.trace")
from groundtrace.monitor import Monitor  # noqa: E402
from groundtrace.sinks.otel import OTelSink  # noqa: E402
from li_support import ANSWER, QUESTION, TOP_K, ScriptedLLM  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.util._once import Once  # noqa: E402

import groundtrace_llamaindex  # noqa: E402


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def global_provider(provider) -> Iterator[TracerProvider]:
    """Install ``provider`` as the global one for one test, then put the old globals back (what
    opentelemetry-test-utils' reset_trace_globals does: the API lets a provider be set only once)."""
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    trace.set_tracer_provider(provider)
    yield provider
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


@pytest.fixture
def otel_monitor(index, provider, sink) -> Iterator[Monitor]:
    with Monitor(metrics=["lexical"], sinks=[OTelSink(tracer_provider=provider), sink], flush_at_exit=False) as monitor:
        groundtrace_llamaindex.instrument(monitor=monitor)
        yield monitor
        groundtrace_llamaindex.uninstrument()


def hex_ids(context) -> tuple[str, str]:
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def assert_evaluation_span(span, parent_context, score) -> None:
    assert span.context.trace_id == parent_context.trace_id
    assert span.parent.span_id == parent_context.span_id
    assert span.attributes["openinference.span.kind"] == "EVALUATOR"
    assert span.attributes["gen_ai.evaluation.name"] == "lexical"
    assert span.attributes["gen_ai.evaluation.score.value"] == score.value
    assert span.attributes["gen_ai.evaluation.score.label"] == "grounded"
    [event] = span.events
    assert event.name == "gen_ai.evaluation.result"
    assert (event.attributes["gen_ai.evaluation.name"], event.attributes["gen_ai.evaluation.score.value"]) == (
        "lexical", score.value)


def test_scores_are_children_of_the_application_request_span(index, provider, exporter, otel_monitor, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    with provider.get_tracer("app").start_as_current_span("request") as request:
        engine.query(QUESTION)
    assert otel_monitor.flush(10)

    [(record, [score])] = sink.rows
    assert (record.trace_id, record.span_id) == hex_ids(request.get_span_context())
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["groundtrace.lexical", "request"]  # no span of the adapter's own
    assert_evaluation_span(spans["groundtrace.lexical"], request.get_span_context(), score)


def test_without_an_application_span_the_adapter_records_its_own_request_span(
        index, global_provider, exporter, otel_monitor, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    engine.query(QUESTION)
    assert otel_monitor.flush(10)

    [(record, [score])] = sink.rows
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["groundtrace.lexical", "invoke_workflow RetrieverQueryEngine.query"]
    request = spans["invoke_workflow RetrieverQueryEngine.query"]
    assert request.parent is None
    assert request.start_time < request.end_time
    assert dict(request.attributes) == {
        "openinference.span.kind": "CHAIN",
        "input.value": QUESTION,
        "output.value": ANSWER,
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "RetrieverQueryEngine.query",
    }
    assert (record.trace_id, record.span_id) == hex_ids(request.context)
    assert_evaluation_span(spans["groundtrace.lexical"], request.context, score)


def test_a_streaming_request_span_lasts_until_the_stream_is_read(index, global_provider, exporter, otel_monitor, sink):
    response = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K, streaming=True).query(QUESTION)
    assert otel_monitor.flush(10)
    assert exporter.get_finished_spans() == ()  # nothing to attach scores to yet, and no empty span

    assert "".join(response.response_gen) == ANSWER
    assert otel_monitor.flush(10)

    [record] = sink.records
    request = next(span for span in exporter.get_finished_spans() if span.name.startswith("invoke_workflow "))
    assert (record.trace_id, record.span_id) == hex_ids(request.context)
    assert request.attributes["output.value"] == ANSWER


def test_a_failed_request_records_no_span(index, global_provider, exporter, otel_monitor):
    with pytest.raises(RuntimeError):
        index.as_query_engine(llm=ScriptedLLM(fail="call"), similarity_top_k=TOP_K).query(QUESTION)

    assert otel_monitor.flush(10)
    assert exporter.get_finished_spans() == ()


def test_an_agents_turn_is_scored_on_the_application_span_or_on_a_request_span_of_its_own(
        index, provider, global_provider, exporter, otel_monitor, sink):
    from agent_support import HALLUCINATED, USER_MSG, searching_agent

    def agent():
        return searching_agent(index)

    async def in_app_span() -> Any:
        with provider.get_tracer("app").start_as_current_span("request") as request:
            await agent().run(user_msg=USER_MSG)  # the run's task starts inside the application's span
        return request

    request = asyncio.run(in_app_span())
    assert otel_monitor.flush(10)
    [first] = sink.records
    assert (first.trace_id, first.span_id) == hex_ids(request.get_span_context())

    async def alone() -> None:
        await agent().run(user_msg=USER_MSG)

    asyncio.run(alone())
    assert otel_monitor.flush(10)
    second = sink.records[1]
    [own] = [span for span in exporter.get_finished_spans() if span.name == "invoke_workflow FunctionAgent.run"]
    assert (second.trace_id, second.span_id) == hex_ids(own.context)
    assert dict(own.attributes) == {"openinference.span.kind": "CHAIN", "input.value": USER_MSG,
                                    "output.value": HALLUCINATED, "gen_ai.operation.name": "invoke_workflow",
                                    "gen_ai.workflow.name": "FunctionAgent.run"}


def test_the_providers_reply_id_reaches_the_evaluation_result(index, global_provider, exporter, otel_monitor, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(reply_id="chatcmpl-Li42"), similarity_top_k=TOP_K)
    engine.query(QUESTION)
    assert otel_monitor.flush(10)

    [record] = sink.records
    assert record.metadata["response_id"] == "chatcmpl-Li42"
    [carrier] = [span for span in exporter.get_finished_spans() if span.name == "groundtrace.lexical"]
    [request] = [span for span in exporter.get_finished_spans() if span.name.startswith("invoke_workflow ")]
    assert carrier.attributes["gen_ai.response.id"] == "chatcmpl-Li42"
    assert [link.context.span_id for link in carrier.links] == [request.context.span_id]
    [event] = carrier.events  # no LoggerProvider here: the event stays on the carrier
    assert event.attributes["gen_ai.response.id"] == "chatcmpl-Li42"


def test_openinference_traces_each_query_once_and_the_scores_sit_on_its_root_span(index, global_provider, exporter,
                                                                                   otel_monitor, sink):
    """OpenInference's LlamaIndexInstrumentor (Phoenix's way of tracing LlamaIndex) beside groundtrace: N queries
    make N traces, each record on its query's root span (found in OpenInference's own map of open spans), and
    groundtrace records no span of its own."""
    instrumentation = pytest.importorskip("openinference.instrumentation.llama_index")
    instrumentor = instrumentation.LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=global_provider)
    try:
        engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)
        for _ in range(3):
            engine.query(QUESTION)
        assert otel_monitor.flush(10)
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    roots = {span.context.trace_id: span for span in spans if span.parent is None}
    assert len(roots) == 3 and not [span for span in spans if span.name.startswith("invoke_workflow")]
    assert len(sink.rows) == 3
    for record, _ in sink.rows:
        assert (record.trace_id, record.span_id) == hex_ids(roots[int(record.trace_id, 16)].context)
