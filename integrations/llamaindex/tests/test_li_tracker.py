"""The RootTracker on its own, for the orderings a live run only hits by chance: a chat stream's
writer thread may finish before or after the root span ends; roots that never end are bounded."""

from __future__ import annotations

import threading
import uuid

from li_support import ANSWER, DORM_RU, QUESTION
from llama_index.core.base.response.schema import Response
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.schema import NodeWithScore, TextNode

from groundtrace_llamaindex import RootTracker

NODE = NodeWithScore(node=TextNode(id_="dorm-ru#0", text=DORM_RU, metadata={"lang": "ru"}), score=0.75)


def span_id(name: str) -> str:
    return f"{name}-{uuid.uuid4()}"


def chat_stream_response() -> StreamingAgentChatResponse:
    response = StreamingAgentChatResponse(chat_stream=iter(()), source_nodes=[NODE])
    response.write_response_to_history_thread = threading.Thread()  # a writer was started
    return response


def writer_finished(response: StreamingAgentChatResponse) -> None:
    # what write_response_to_history leaves behind, before its span exits
    response.response, response.is_done = ANSWER, True


def start_chat(tracker: RootTracker) -> tuple[str, str]:
    root = span_id("ContextChatEngine.stream_chat")
    writer = span_id("StreamingAgentChatResponse.write_response_to_history")
    assert tracker.span_started(root, None, {"message": QUESTION}, None)
    assert tracker.span_started(writer, root, {}, None)
    return root, writer


def test_a_chat_writer_that_ends_before_the_root_span(monitor, sink):
    tracker, response = RootTracker(monitor), chat_stream_response()
    root, writer = start_chat(tracker)

    writer_finished(response)
    tracker.span_exited(writer, response, None)
    tracker.span_exited(root, None, response)

    assert monitor.flush(10)
    [record] = sink.records
    assert (record.id, record.question, record.contexts, record.answer) == (root, QUESTION, [DORM_RU], ANSWER)
    assert record.metadata == {"nodes": [{"id": "dorm-ru#0", "score": 0.75, "metadata": {"lang": "ru"}}]}
    assert (tracker.open_roots, tracker.tracked_spans) == (0, 0)


def test_a_chat_writer_that_ends_after_the_root_span(monitor, sink):
    tracker, response = RootTracker(monitor), chat_stream_response()
    root, writer = start_chat(tracker)

    tracker.span_exited(root, None, response)
    assert (tracker.open_roots, monitor.stats.submitted) == (1, 0)
    writer_finished(response)
    tracker.span_exited(writer, response, None)

    assert monitor.flush(10)
    assert [record.answer for record in sink.records] == [ANSWER]
    assert (tracker.open_roots, tracker.tracked_spans) == (0, 0)


def test_a_chat_writer_that_raises_leaves_nothing(monitor, sink):
    tracker, response = RootTracker(monitor), chat_stream_response()
    root, writer = start_chat(tracker)

    tracker.span_exited(root, None, response)
    tracker.span_dropped(writer, response, RuntimeError("the stream broke"))

    assert monitor.flush(10)
    assert (monitor.stats.submitted, tracker.open_roots, tracker.tracked_spans) == (0, 0, 0)


def test_a_failing_step_inside_a_root_that_recovers_is_still_scored(monitor, sink):
    tracker = RootTracker(monitor)
    root, step = span_id("RetrieverQueryEngine.query"), span_id("FlakyRetriever.retrieve")
    tracker.span_started(root, None, {"str_or_query_bundle": QUESTION}, None)
    tracker.span_started(step, root, {}, None)

    tracker.span_dropped(step, None, TimeoutError("retry"))
    tracker.span_exited(root, None, Response(response=ANSWER, source_nodes=[NODE]))

    assert monitor.flush(10)
    assert [(r.question, r.answer) for r in sink.records] == [(QUESTION, ANSWER)]


def test_roots_that_never_end_are_bounded(monitor, sink):
    tracker = RootTracker(monitor, max_open_roots=3)
    roots = [span_id("ContextChatEngine.stream_chat") for _ in range(5)]
    for root in roots:
        tracker.span_started(root, None, {"message": QUESTION}, None)

    assert tracker.open_roots == 3
    tracker.span_exited(roots[0], None, Response(response=ANSWER, source_nodes=[NODE]))  # forgotten: the oldest
    tracker.span_exited(roots[4], None, Response(response=ANSWER, source_nodes=[NODE]))

    assert monitor.flush(10)
    assert [record.id for record in sink.records] == [roots[4]]
    stats = tracker.stats()  # the two evicted are counted, not lost
    assert (stats.roots, stats.recorded, stats.evicted, stats.no_record, stats.in_flight) == (5, 1, 2, {}, 2)
    assert stats.accounted() == stats.roots


def test_after_close_nothing_is_tracked(monitor, sink):
    tracker = RootTracker(monitor)
    root = span_id("RetrieverQueryEngine.query")
    tracker.span_started(root, None, {"str_or_query_bundle": QUESTION}, None)

    tracker.close()

    assert tracker.span_started(span_id("RetrieverQueryEngine.query"), None, {}, None) is False
    tracker.span_exited(root, None, Response(response=ANSWER))
    assert monitor.flush(10)
    assert (monitor.stats.submitted, tracker.open_roots) == (0, 0)
