"""What the tracker does on the application's thread when a root ends, and what it leaves to the
Monitor's worker: question, answer, trace ids and links are read at once; the contexts are chosen
and the Record validated in the worker, and only for a record the Monitor keeps."""

from __future__ import annotations

import threading

import pytest
from groundtrace.monitor import Monitor
from li_support import ANSWER, CONTEXTS, QUESTION, TOP_K, CollectSink, ScriptedLLM, assert_nothing_left

import groundtrace_llamaindex
from groundtrace_llamaindex import run as run_module


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """The thread of every Record the worker builds from a root's end."""
    built: list[int] = []
    build = run_module.TurnEnd.build

    def spy(self):
        built.append(threading.get_ident())
        return build(self)

    monkeypatch.setattr(run_module.TurnEnd, "build", spy)
    return built


def test_the_record_is_built_off_the_applications_thread(index, instrumented, sink, builds):
    index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K).query(QUESTION)
    assert instrumented.flush(10)

    assert len(builds) == 1 and builds[0] != threading.get_ident()
    [record] = sink.records
    assert (record.question, record.answer, sorted(record.contexts)) == (QUESTION, ANSWER, sorted(CONTEXTS))
    assert_nothing_left()


def test_a_record_sampled_out_is_never_built_and_still_counted(index, builds):
    sink = CollectSink()
    with Monitor(metrics=["lexical"], sinks=[sink], sample_rate=0.0, flush_at_exit=False) as monitor:
        groundtrace_llamaindex.instrument(monitor=monitor)
        try:
            index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K).query(QUESTION)
            assert monitor.flush(10)
            stats = groundtrace_llamaindex.stats()
        finally:
            groundtrace_llamaindex.uninstrument()
        assert (monitor.stats.submitted, monitor.stats.sampled_out) == (1, 1)
    assert builds == [] and sink.records == []
    assert (stats.roots, stats.recorded) == (1, 1)


def test_a_build_that_fails_in_the_worker_is_counted_and_scored_as_failed(index, instrumented, sink, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug of groundtrace's")

    monkeypatch.setattr(run_module, "choose_contexts", broken)
    index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K).query(QUESTION)  # the application sees nothing
    assert instrumented.flush(10)

    [(record, [score])] = sink.rows
    assert record.id is not None and not score.ok and "failed to build the record" in score.error
    assert (instrumented.stats.submitted, instrumented.stats.failed) == (1, 1)
    stats = groundtrace_llamaindex.stats()
    assert (stats.recorded, stats.callback_errors) == (1, 1)
