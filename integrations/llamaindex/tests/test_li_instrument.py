"""instrument() / uninstrument(): attach once, detach cleanly, choose the Monitor, entry point."""

from __future__ import annotations

import threading
from importlib.metadata import entry_points

import pytest
from groundtrace import Record
from groundtrace.capture import kit as capture
from groundtrace.monitor.autoinstrument import instrument_all
from li_support import ANSWER, QUESTION, TOP_K, ScriptedLLM, our_handlers, our_span_handler
from llama_index.core.instrumentation import get_dispatcher

import groundtrace_llamaindex


@pytest.fixture
def environment(monkeypatch, tmp_path):
    """GROUNDTRACE_* for a cheap shared Monitor; the shared Monitor is forgotten before and after."""
    monkeypatch.chdir(tmp_path)  # no sink configured: the default store is opened here, not in the checkout
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")
    monkeypatch.setenv("GROUNDTRACE_SAMPLE_RATE", "0.5")
    monkeypatch.delenv("GROUNDTRACE_SINKS", raising=False)
    capture.reset_shared_monitor()
    yield
    groundtrace_llamaindex.uninstrument()
    capture.reset_shared_monitor()


def test_instrument_attaches_once_and_after_uninstrument_nothing_is_captured(index, monitor, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)
    assert our_handlers() == []

    assert groundtrace_llamaindex.instrument(monitor=monitor) is monitor
    assert groundtrace_llamaindex.instrument(monitor=monitor) is monitor  # a second call changes nothing
    assert [type(h).__name__ for h in our_handlers()] == ["GroundtraceSpanHandler", "GroundtraceEventHandler"]
    assert groundtrace_llamaindex.is_instrumented()
    engine.query(QUESTION)
    groundtrace_llamaindex.uninstrument()
    groundtrace_llamaindex.uninstrument()  # and so does a second uninstrument
    engine.query(QUESTION)

    assert (our_handlers(), groundtrace_llamaindex.is_instrumented()) == ([], False)
    assert monitor.flush(10)
    assert [record.answer for record in sink.records] == [ANSWER]
    assert monitor.stats.submitted == 1
    assert monitor.submit(Record(question="q", contexts=["c"], answer="a"))  # the caller's Monitor stays open


def test_dispatcher_shutdown_closes_the_handler_and_forgets_open_requests(index, monitor, sink):
    groundtrace_llamaindex.instrument(monitor=monitor)
    try:
        gate = threading.Event()
        engine = index.as_chat_engine(chat_mode="context", llm=ScriptedLLM(gate=gate), similarity_top_k=TOP_K)
        response = engine.stream_chat(QUESTION)  # open until its stream ends
        assert our_span_handler().tracker.open_roots == 1

        get_dispatcher().shutdown()
        gate.set()
        assert "".join(response.response_gen) == ANSWER
        engine.chat(QUESTION)

        assert our_span_handler().tracker.open_roots == 0
        assert monitor.flush(10)
        assert monitor.stats.submitted == 0
    finally:
        groundtrace_llamaindex.uninstrument()


def test_a_stream_read_after_uninstrument_is_not_scored(index, monitor, sink):
    groundtrace_llamaindex.instrument(monitor=monitor)
    response = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K, streaming=True).query(QUESTION)
    groundtrace_llamaindex.uninstrument()

    assert "".join(response.response_gen) == ANSWER
    assert monitor.flush(10)
    assert monitor.stats.submitted == 0


def test_instrument_builds_its_own_monitor_from_arguments_and_closes_it(index, sink, environment):
    monitor = groundtrace_llamaindex.instrument(metrics=["lexical"], sinks=[sink], sample_rate=1.0, flush_at_exit=False)

    assert ([m.name for m in monitor.metrics], monitor.sinks, monitor.sample_rate) == (["lexical"], [sink], 1.0)
    assert monitor is not capture.shared_monitor()
    index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K).query(QUESTION)
    groundtrace_llamaindex.uninstrument()  # flushes and closes the Monitor it built

    assert [record.question for record in sink.records] == [QUESTION]
    assert monitor.submit(Record(question="q", contexts=["c"], answer="a")) is False
    assert monitor.stats.dropped == 1


def test_instrument_without_arguments_uses_the_shared_monitor_configured_from_the_environment(environment):
    monitor = groundtrace_llamaindex.instrument()

    assert monitor is capture.shared_monitor()
    assert ([m.name for m in monitor.metrics], monitor.sample_rate) == (["lexical"], 0.5)
    groundtrace_llamaindex.uninstrument()
    assert capture.shared_monitor() is not monitor  # uninstrument() closed and forgot it


def test_a_monitor_and_monitor_options_together_are_refused(monitor):
    with pytest.raises(ValueError, match="either monitor= or metrics"):
        groundtrace_llamaindex.instrument(monitor=monitor, sample_rate=0.5)
    assert not groundtrace_llamaindex.is_instrumented()


def test_the_entry_point_is_instrument_and_autoinstrumentation_finds_it(environment):
    [entry] = [e for e in entry_points(group="groundtrace.instrumentors") if e.name == "llamaindex"]
    assert entry.load() is groundtrace_llamaindex.instrument

    assert "llamaindex" in instrument_all(force=True)
    assert groundtrace_llamaindex.is_instrumented()


def test_groundtrace_enabled_off_makes_instrument_a_no_op(monkeypatch, monitor):
    monkeypatch.setenv("GROUNDTRACE_ENABLED", "off")
    assert groundtrace_llamaindex.instrument(monitor=monitor) is None
    assert not groundtrace_llamaindex.is_instrumented()


def test_instrument_names_context_keys_process_wide(monkeypatch):
    from groundtrace.capture import carried

    import groundtrace_llamaindex

    monkeypatch.setattr(carried, "_named_by_app", set())
    monkeypatch.setattr(carried, "_NAMES", {})
    assert not carried.is_context_name("search_hits")
    groundtrace_llamaindex.instrument(metrics=["lexical"], sinks="none", context_keys=["search_hits"])
    try:
        assert carried.is_context_name("search_hits")
    finally:
        groundtrace_llamaindex.uninstrument()
