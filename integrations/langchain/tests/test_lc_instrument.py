"""instrument() / uninstrument(): global capture through langchain-core's configure hook."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.sinks.jsonl import JsonlSink

import groundtrace_langchain
from groundtrace_langchain import GroundtraceCallbackHandler, instrument, instrumented_handler, uninstrument
from lc_app import BY_ID, GROUNDED_ANSWER, CollectingSink, rag_chain, rag_graph

QUESTION = "What is the capital of France?"
PARIS = BY_ID["en-paris"]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # with no sink configured the default store is written here, not in the checkout
    for name in ("GROUNDTRACE_ENABLED", "GROUNDTRACE_METRICS", "GROUNDTRACE_SINKS", "GROUNDTRACE_SAMPLE_RATE",
                 "GROUNDTRACE_JSONL_PATH", "GROUNDTRACE_QUEUE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_instrument_captures_chains_and_graphs_without_any_callbacks(clean_env):
    sink = CollectingSink()
    monitor = instrument(metrics=["lexical"], sinks=[sink])

    assert isinstance(monitor, Monitor) and instrumented_handler().monitor is monitor
    rag_chain().invoke(QUESTION)
    rag_graph().invoke({"question": QUESTION})

    assert monitor.flush(10)
    assert [(r.question, r.contexts, r.answer, r.metadata["run_name"]) for r in sink.records] == [
        (QUESTION, [PARIS.page_content], GROUNDED_ANSWER, "RunnableSequence"),
        (QUESTION, [PARIS.page_content], GROUNDED_ANSWER, "LangGraph"),
    ]
    assert [scores[0].value for _, scores in sink.emitted] == [1.0, 1.0]


def test_instrument_reads_its_defaults_from_the_environment_and_kwargs_override(clean_env, tmp_path):
    path = tmp_path / "scores.jsonl"
    clean_env.setenv("GROUNDTRACE_METRICS", "lexical")
    clean_env.setenv("GROUNDTRACE_SINKS", "jsonl")
    clean_env.setenv("GROUNDTRACE_JSONL_PATH", str(path))
    clean_env.setenv("GROUNDTRACE_SAMPLE_RATE", "0.5")
    clean_env.setenv("GROUNDTRACE_QUEUE_SIZE", "17")

    monitor = instrument(sample_rate=1.0)
    assert [m.name for m in monitor.metrics] == ["lexical"]
    assert [type(s) for s in monitor.sinks] == [JsonlSink]
    assert (monitor.sample_rate, monitor._queue.maxsize) == (1.0, 17)

    rag_chain().invoke(QUESTION)
    assert monitor.flush(10)
    [line] = path.read_text(encoding="utf-8").splitlines()
    written = json.loads(line)
    assert (written["record"]["question"], written["record"]["contexts"], written["record"]["answer"]) == (
        QUESTION, [PARIS.page_content], GROUNDED_ANSWER)
    assert written["record"]["metadata"]["documents"] == [
        {"id": "en-paris", "source": "france.md", "metadata": {"source": "france.md", "page": 1}}]
    assert [(s["metric"], s["value"]) for s in written["scores"]] == [("lexical", 1.0)]


def test_instrument_twice_is_harmless(clean_env, monitor, sink):
    first = instrument(monitor=monitor)
    assert instrument() is first
    assert instrument(metrics=["facts"]) is first  # logged: uninstrument() first to change settings

    rag_chain().invoke(QUESTION)
    assert monitor.flush(10)
    assert len(sink.records) == 1


def test_an_explicit_handler_takes_the_run_and_the_global_one_stays_out(clean_env, monitor, sink):
    global_sink = CollectingSink()
    global_monitor = instrument(metrics=["lexical"], sinks=[global_sink])

    rag_chain().invoke(QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]})
    rag_chain().invoke(QUESTION)

    assert monitor.flush(10) and global_monitor.flush(10)
    assert (len(sink.records), len(global_sink.records)) == (1, 1)
    assert sink.records[0].run_id != global_sink.records[0].run_id


def test_uninstrument_stops_capture_and_closes_the_monitor_instrument_built(clean_env):
    sink = CollectingSink()
    built = instrument(metrics=["lexical"], sinks=[sink])
    rag_chain().invoke(QUESTION)
    assert built.flush(10)

    uninstrument()
    rag_chain().invoke(QUESTION)

    assert instrumented_handler() is None
    assert len(sink.records) == 1
    assert built.submit(Record(answer="a", contexts=["c"])) is False  # closed: dropped
    uninstrument()  # twice is harmless too


def test_uninstrument_leaves_a_given_monitor_open(clean_env, monitor, sink):
    instrument(monitor=monitor)
    uninstrument()
    assert monitor.submit(Record(answer="Paris.", contexts=["Paris."])) is True
    assert monitor.flush(10) and len(sink.records) == 1


def test_instrument_again_after_uninstrument_uses_the_new_settings(clean_env, monitor, sink):
    instrument(metrics=["lexical"], sinks=[CollectingSink()])
    uninstrument()
    assert instrument(monitor=monitor) is monitor

    rag_chain().invoke(QUESTION)
    assert monitor.flush(10) and len(sink.records) == 1


def test_groundtrace_enabled_off_makes_instrument_a_no_op(clean_env, monitor, sink):
    clean_env.setenv("GROUNDTRACE_ENABLED", "0")
    assert instrument(monitor=monitor) is None

    rag_chain().invoke(QUESTION)
    assert monitor.flush(10) and sink.records == []


def test_instrument_rejects_a_monitor_together_with_monitor_options(clean_env, monitor):
    with pytest.raises(ValueError, match="either monitor= or metrics/sinks/Monitor options"):
        instrument(monitor=monitor, metrics=["lexical"])
    assert instrumented_handler() is None


def test_the_core_finds_instrument_through_its_entry_point():
    [entry] = [e for e in entry_points(group="groundtrace.instrumentors") if e.name == "langchain"]
    assert entry.value == "groundtrace_langchain:instrument"
    assert entry.load() is groundtrace_langchain.instrument


def test_a_closed_monitor_under_instrument_never_breaks_the_app(clean_env):
    """A Monitor closed under a live instrumentation drops records; the application never notices."""
    with Monitor(metrics=["lexical"], flush_at_exit=False) as monitor:
        instrument(monitor=monitor)
    assert rag_chain().invoke(QUESTION) == GROUNDED_ANSWER
    assert monitor.stats.dropped == 1
