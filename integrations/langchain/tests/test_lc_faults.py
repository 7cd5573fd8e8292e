"""A real LangChain app with groundtrace attached, under faults an SRE would try first (loopback only): a busy
Prometheus port, a sink path that cannot be written, a 5 MB retrieved context, an answer with a lone surrogate
under a mask. The app's calls return, the failed part is off with one WARNING, the rest keeps scoring, and
no masked text reaches a log."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from groundtrace.capture.kit import reset_shared_monitor
from groundtrace.monitor import Monitor
from groundtrace_langchain import GroundtraceCallbackHandler, instrument, uninstrument
from langchain_core.documents import Document
from lc_app import CORPUS, CollectingSink, KeywordRetriever, rag_chain

QUESTION = "What is the capital of France?"


@pytest.fixture
def busy_port():
    with socket.socket() as holder:  # something else of this machine listens there
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_busy_prometheus_port_fails_nothing_and_is_said_once(busy_port, sink, caplog):
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[sink], isolation="thread",
                                             telemetry=f"prometheus:127.0.0.1:{busy_port}")
        for _ in range(3):
            assert rag_chain().invoke(QUESTION, config={"callbacks": [handler]}) == "Paris is the capital of France."
        assert handler.monitor.flush(10)
        handler.close()
    assert len(sink.records) == 3
    said = [r.getMessage() for r in caplog.records if "own metrics" in r.getMessage()]
    assert len(said) == 1 and f"cannot listen on 127.0.0.1:{busy_port}" in said[0]


def test_a_busy_port_named_in_the_environment_loses_no_record(busy_port, monkeypatch, tmp_path, caplog):
    path = tmp_path / "scores.jsonl"
    monkeypatch.setenv("GROUNDTRACE_TELEMETRY", f"prometheus:127.0.0.1:{busy_port}")
    monkeypatch.setenv("GROUNDTRACE_SINKS", f"jsonl:{path}")
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")
    reset_shared_monitor()
    try:
        with caplog.at_level(logging.WARNING, logger="groundtrace"):
            monitor = instrument()
            for _ in range(3):
                rag_chain().invoke(QUESTION)
            assert monitor is not None and monitor.flush(30)
            stats = monitor.stats
    finally:
        uninstrument()
        reset_shared_monitor()
    assert (stats.scored, stats.failed) == (3, 0)
    assert len(path.read_text().splitlines()) == 3


def test_a_sink_path_that_cannot_be_written_at_start_up_builds_and_is_counted(tmp_path, caplog):
    blocker = tmp_path / "out"
    blocker.write_text("a file where the folder should be")
    other = CollectingSink()
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[f"jsonl:{blocker / 'scores.jsonl'}", other],
                                             isolation="thread")
        rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
        assert handler.monitor.flush(10)
        stats = handler.monitor.stats
        handler.close()
    assert (stats.scored, stats.sink_errors, len(other.records)) == (1, 1, 1)
    assert any("sink jsonl failed: record" in r.getMessage() for r in caplog.records)


def test_a_5_mb_context_is_cut_where_the_record_is_built_and_says_so(sink):
    huge = Document(id="huge", page_content="Paris is the capital of France. " * 160_000)  # 5.1 MB
    monitor = Monitor(["lexical"], [sink], flush_at_exit=False)  # a scoring process: the record is piped to it
    handler = GroundtraceCallbackHandler(monitor=monitor)
    chain = rag_chain(retriever=KeywordRetriever(documents=[huge, *CORPUS], k=1))
    started = time.perf_counter()
    for _ in range(5):
        chain.invoke(QUESTION, config={"callbacks": [handler]})
    took = time.perf_counter() - started
    assert monitor.flush(60)
    monitor.close()
    assert len(sink.records) == 5
    record = sink.records[0]
    assert [len(text) for text in record.contexts] == [200_000]
    assert record.metadata["truncated"] == {"contexts": {"chars": len(huge.page_content), "kept": 200_000,
                                                         "passages": 1, "kept_passages": 1}}
    assert took < 5.0  # the application's five calls (a generous bound: the benchmark measures it)


SECRET = "Marie Curie's passport number is X1234567"


def hide(text: str) -> str:
    return text.replace("X1234567", "[id]")


def test_an_answer_with_a_lone_surrogate_is_repaired_and_no_masked_text_is_logged(sink, caplog):
    broken = f"{SECRET}, and then the stream cut a character: \ud83d"
    with caplog.at_level(logging.DEBUG, logger="groundtrace"):
        monitor = Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False)
        handler = GroundtraceCallbackHandler(monitor=monitor, mask=hide)
        rag_chain(broken).invoke(f"{QUESTION} ({SECRET})", config={"callbacks": [handler]})
        assert monitor.flush(10)
        monitor.close()
    [record] = sink.records
    assert record.answer == "Marie Curie's passport number is [id], and then the stream cut a character: \ufffd"
    assert monitor.stats.scored == 1
    assert "X1234567" not in caplog.text
