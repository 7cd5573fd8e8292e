"""instrument(mask=...): a real query engine's question, contexts and answer are masked before the
Monitor's metrics and sinks see them, whichever Monitor scores them; a mask or text capture off keeps
the question and answer off the adapter's own request span."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from groundtrace.monitor import Monitor
from li_support import CONTEXTS, QUESTION, TOP_K, CollectSink, ScriptedLLM

import groundtrace_llamaindex


def hide_university(text: str) -> str:
    return text.replace("СПбГУ", "<org>").replace("Saint Petersburg State University", "<org>")


@pytest.fixture
def engine(index):
    return index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)


def test_instrument_with_a_mask_and_your_monitor(engine, monitor, sink):
    groundtrace_llamaindex.instrument(monitor=monitor, mask=hide_university)
    try:
        response = engine.query(QUESTION)
    finally:
        groundtrace_llamaindex.uninstrument()

    assert "СПбГУ" in str(response)  # the application's own answer is untouched
    assert monitor.flush(10)
    [(record, [score])] = sink.rows
    assert record.question == hide_university(QUESTION) and "<org>" in record.question
    assert record.contexts == [hide_university(c) for c in CONTEXTS]
    assert record.answer == hide_university(str(response))
    assert all(record.answer[s.start:s.end] == s.text for s in score.spans)


def test_instrument_with_a_mask_builds_its_monitor_and_masks_through_it(index, engine):
    sink = CollectSink()
    monitor = groundtrace_llamaindex.instrument(metrics=["lexical"], sinks=[sink], mask=hide_university,
                                                isolation="thread", flush_at_exit=False)
    try:
        engine.query(QUESTION)
        assert monitor is not None and monitor.flush(10)
    finally:
        groundtrace_llamaindex.uninstrument()
    [(record, _)] = sink.rows
    assert "СПбГУ" not in record.question + record.answer + "".join(record.contexts)


def test_a_failing_mask_never_reaches_the_application(engine, monitor, sink):
    def broken(text: str) -> str:
        raise RuntimeError(text)

    groundtrace_llamaindex.instrument(monitor=monitor, mask=broken)
    try:
        assert "СПбГУ" in str(engine.query(QUESTION))
    finally:
        groundtrace_llamaindex.uninstrument()
    assert monitor.flush(10)
    [(record, [score])] = sink.rows
    assert record.question is None and record.answer is None and record.contexts is None
    assert score.error.startswith("invalid record: the mask raised RuntimeError")
    assert monitor.stats.failed == 1


@pytest.fixture
def request_spans() -> Iterator:
    """A real SDK provider installed globally for one test (the adapter's request span needs one)."""
    trace = pytest.importorskip("opentelemetry.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util._once import Once

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    trace.set_tracer_provider(provider)
    yield lambda: [dict(s.attributes) for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow ")]
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


@pytest.mark.parametrize("setup", [{"mask": hide_university}, {"capture_text": False}],
                         ids=["mask", "capture_text off"])
def test_the_request_span_carries_no_text_when_a_mask_or_capture_text_hides_it(engine, request_spans, setup):
    mask = setup.get("mask")
    with Monitor(metrics=["lexical"], sinks=[], capture_text=setup.get("capture_text", True),
                 flush_at_exit=False) as monitor:
        groundtrace_llamaindex.instrument(monitor=monitor, mask=mask)
        try:
            engine.query(QUESTION)
        finally:
            groundtrace_llamaindex.uninstrument()
    [attributes] = request_spans()
    assert "input.value" not in attributes and "output.value" not in attributes
    assert attributes["gen_ai.workflow.name"] == "RetrieverQueryEngine.query"
