"""The handlers' edge: a span or event of a run that cannot be read makes no record for that run, never one built
from the part of it that could be read; a WARNING says which and why, once per cause, and stats() counts it."""

from __future__ import annotations

import inspect
import logging

import pytest
from li_support import QUESTION, TOP_K, ScriptedLLM, our_span_handler
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent

import groundtrace_llamaindex
from groundtrace_llamaindex import tracker as tracker_module
from groundtrace_llamaindex.events import UnreadableEvent, parent_key, span_key, tag_dict

UNREADABLE = "groundtrace could not read one of its events"


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "LlamaIndex: " in r.getMessage()
            and "could not be read" in r.getMessage()]


def test_an_event_that_cannot_be_read_makes_no_record_rather_than_a_partial_one(index, instrumented, sink, caplog,
                                                                                 monkeypatch):
    """The retrieval's end cannot be read (forced here): the answer would be scored without its contexts."""
    def broken(tracker, run, span_id, event):
        raise RuntimeError("nodes groundtrace cannot read")

    monkeypatch.setitem(tracker_module.EVENT_READERS, RetrievalEndEvent, broken)
    before = groundtrace_llamaindex.stats()
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        for _ in range(2):
            assert str(engine.query(QUESTION))
    assert instrumented.flush(10)
    assert sink.rows == []
    after = groundtrace_llamaindex.stats()
    assert after.no_record.get(UNREADABLE, 0) - before.no_record.get(UNREADABLE, 0) == 2
    assert after.callback_errors - before.callback_errors == 2 and after.recorded == before.recorded
    assert said(caplog) == ["groundtrace: LlamaIndex: RetrievalEndEvent could not be read (RuntimeError): the run it "
                            "belongs to makes no record (said once per cause; counted in stats().callback_errors and "
                            "no_record)"]


def test_a_span_whose_id_is_no_string_is_said_by_its_type_and_never_raises(index, instrumented, caplog):
    handler = our_span_handler()
    arguments = inspect.signature(lambda query: None).bind(QUESTION)
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        handler.span_enter(id_=12345, bound_args=arguments, parent_id=None)
        handler.span_enter(id_=67890, bound_args=arguments, parent_id=None)
        handler.span_exit(id_=12345, bound_args=arguments, result="an answer")
    assert said(caplog) == [
        "groundtrace: LlamaIndex: span start could not be read (span id of type int): the run it belongs to makes no "
        "record (said once per cause; counted in stats().callback_errors and no_record)",
        "groundtrace: LlamaIndex: span exit could not be read (span id of type int): the run it belongs to makes no "
        "record (said once per cause; counted in stats().callback_errors and no_record)"]


def test_the_readers_of_the_edge():
    assert span_key("RetrieverQueryEngine.query-1") == "RetrieverQueryEngine.query-1" and parent_key(None) is None
    for value, cause in ((b"x", "span id of type bytes"), ("", "span id is an empty or overlong string"),
                         (None, "span id of type NoneType")):
        with pytest.raises(UnreadableEvent) as raised:
            span_key(value)
        assert raised.value.cause == cause
    assert (tag_dict(None), tag_dict({"a": 1}), tag_dict(["a"]), tag_dict({1: "x", "b": 2})) == \
        (None, {"a": 1}, {}, {"b": 2})
