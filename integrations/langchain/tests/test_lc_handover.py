"""What the handler does on the application's thread when a root ends, and what it leaves to the
Monitor's worker: the question and the answer are read at once (the application may change its
input and output as soon as invoke() returns); the contexts are chosen and the Record validated in
the worker, and only for a record the Monitor keeps."""

from __future__ import annotations

import threading

import pytest
from groundtrace.monitor import Monitor
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from lc_app import GROUNDED_ANSWER, CollectingSink, rag_chain

from groundtrace_langchain import GroundtraceCallbackHandler
from groundtrace_langchain import records as records_module

QUESTION = "What is the capital of France?"


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """The thread of every Record the worker builds from a root's end."""
    built: list[int] = []
    build = records_module.TurnEnd.build

    def spy(self):
        built.append(threading.get_ident())
        return build(self)

    monkeypatch.setattr(records_module.TurnEnd, "build", spy)
    return built


class HoldingSink(CollectingSink):
    """Holds the Monitor's worker in its first emit() until released: what is queued meanwhile is
    built only after the test has done what it wants on the application's side."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.release = threading.Event(), threading.Event()

    def emit(self, record, scores) -> None:
        super().emit(record, scores)
        if len(self.emitted) == 1:
            self.holding.set()
            self.release.wait(10)


def chat_chain():
    """{'messages': [...]} -> the last human message -> the RAG chain."""
    return RunnableLambda(lambda state: state["messages"][-1].content, name="last_message") | rag_chain()


def test_the_record_is_built_off_the_applications_thread(handler, monitor, sink, builds):
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert monitor.flush(10)

    assert len(builds) == 1 and builds[0] != threading.get_ident()
    [record] = sink.records
    assert (record.question, record.answer, record.contexts) == (QUESTION, GROUNDED_ANSWER, [GROUNDED_ANSWER])


def test_a_record_sampled_out_is_never_built_and_still_counted(monitor, sink, builds, capture_delta):
    handler = GroundtraceCallbackHandler(monitor=monitor, sample_rate=0.0)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert monitor.flush(10)

    assert builds == [] and sink.emitted == []
    assert (monitor.stats.submitted, monitor.stats.sampled_out) == (1, 1)
    assert capture_delta() == {"roots": 1, "recorded": 1}


def test_the_question_is_the_one_asked_even_if_the_application_changes_its_input_right_after(builds):
    sink = HoldingSink()
    monitor = Monitor(metrics=["lexical"], sinks=[sink], isolation="thread", flush_at_exit=False)
    handler = GroundtraceCallbackHandler(monitor=monitor)
    chain = chat_chain()
    try:
        chain.invoke({"messages": [HumanMessage("Where is the Eiffel Tower?")]}, config={"callbacks": [handler]})
        assert sink.holding.wait(10)  # the worker is held: what comes next waits in the queue

        conversation = {"messages": [HumanMessage(QUESTION)]}
        chain.invoke(conversation, config={"callbacks": [handler]})
        # a chat loop appends the reply and the next question to the same list at once
        conversation["messages"] += [AIMessage(GROUNDED_ANSWER), HumanMessage("And of Russia?")]
        assert len(builds) == 1  # the second record is not built yet

        sink.release.set()
        assert monitor.flush(10)
    finally:
        sink.release.set()
        monitor.close()
    assert len(builds) == 2
    second = sink.records[1]
    assert (second.question, second.answer) == (QUESTION, GROUNDED_ANSWER)


def test_a_build_that_fails_in_the_worker_is_counted_and_scored_as_failed(handler, monitor, sink, capture_delta,
                                                                         monkeypatch):
    def broken(self, carried=None):
        raise RuntimeError("a bug of groundtrace's")

    monkeypatch.setattr(records_module.TurnEnd, "finish", broken)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})  # the application sees nothing
    assert monitor.flush(10)

    [(record, [score])] = sink.emitted
    assert record.id is not None and not score.ok and "failed to build the record" in score.error
    assert (monitor.stats.submitted, monitor.stats.failed) == (1, 1)
    assert capture_delta() == {"roots": 1, "recorded": 1, "callback_errors": 1}
