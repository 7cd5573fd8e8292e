"""RootTracker: follows every LlamaIndex root span to its end and submits one Record per root.

A root is a span that starts with no LlamaIndex span around it: ``query``, ``chat``,
``stream_chat``, their async twins, or a function of the application decorated with
``dispatcher.span``. Each later span and event is filed under its root by span id, so concurrent
requests (threads, asyncio tasks) never mix. A root ends:

- with its span, when the result is final (Response, AgentChatResponse, a string);
- when the caller has read a StreamingResponse / AsyncStreamingResponse to its end (the LLM only
  runs while the stream is read, after the root span is over);
- when LlamaIndex's writer thread or task has read a chat stream (StreamingAgentChatResponse) to
  its end: the ``write_response_to_history`` span that is a child of the root.

A root that raises, a stream that raises or is left unread, and a root with no question or no
answer (index building, a bare embedding call) are not scored and leave nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from groundtrace.monitor import Monitor
from groundtrace.privacy import Mask
from groundtrace.redaction import get_logger
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent

from groundtrace_llamaindex.extract import answer_text, llm_output_text, query_text, source_nodes
from groundtrace_llamaindex.run import LLM_END, QUERY_END, SYNTHESIZE_END, RootRun
from groundtrace_llamaindex.streams import follow_async_tokens, follow_tokens

log = get_logger("groundtrace.llamaindex")

# Roots whose end never comes (a chat stream whose writer task never ran) must not pile up forever;
# far above any real number of requests in flight in one process.
MAX_OPEN_ROOTS = 10_000

# The events that carry something for the Record; every other event is ignored at one dict lookup.
EVENT_READERS: dict[type, Callable[[RootRun, Any], None]] = {
    QueryStartEvent: lambda run, e: run.note_question(query_text(e.query)),
    RetrievalStartEvent: lambda run, e: run.note_question(query_text(e.str_or_query_bundle)),
    RetrievalEndEvent: lambda run, e: run.note_nodes(e.nodes),
    QueryEndEvent: lambda run, e: run.note_answer(answer_text(e.response), QUERY_END, query_text(e.query)),
    SynthesizeEndEvent: lambda run, e: run.note_answer(answer_text(e.response), SYNTHESIZE_END, query_text(e.query)),
    LLMCompletionEndEvent: lambda run, e: run.note_answer(llm_output_text(e.response), LLM_END),
    LLMChatEndEvent: lambda run, e: run.note_answer(llm_output_text(e.response), LLM_END),
}


class RootTracker:
    """``mask`` goes with each Record to the Monitor, which applies it off the request path."""

    def __init__(self, monitor: Monitor, *, max_open_roots: int = MAX_OPEN_ROOTS, mask: Mask | None = None) -> None:
        self._monitor = monitor
        self._mask = mask
        # the request span this adapter may write carries the text only where nothing hides it
        self._span_text = monitor.shows_raw_text and mask is None
        self._max_open_roots = max_open_roots
        self._lock = threading.Lock()
        self._runs: dict[str, RootRun] = {}  # root span id -> run, oldest first
        self._root_of: dict[str, str] = {}  # span id (roots included) -> its root span id
        self._closed = False
        self._warned_full = False

    @property
    def open_roots(self) -> int:
        return len(self._runs)

    @property
    def tracked_spans(self) -> int:
        return len(self._root_of)

    # ----------------------------------------------------------------------------- spans
    def span_started(self, span_id: str, parent_id: str | None, arguments: dict[str, Any],
                     tags: dict[str, Any] | None) -> bool:
        """File a new span under its root; True if it is tracked."""
        if self._closed:
            return False
        if parent_id is None:
            run = RootRun.start(span_id, arguments, tags)
            with self._lock:
                self._runs[span_id] = run
                self._root_of[span_id] = span_id
                evicted = self._evict_beyond_limit()
            if evicted and not self._warned_full:
                self._warned_full = True
                log.warning("groundtrace: more than %d LlamaIndex requests open at once; the oldest are "
                            "dropped unscored", self._max_open_roots)
            return True
        with self._lock:
            root_id = self._root_of.get(parent_id)
            if root_id is None:  # under a span that began before instrument(), or already ended
                return False
            self._root_of[span_id] = root_id
            self._runs[root_id].open_children.add(span_id)
            return True

    def span_exited(self, span_id: str, instance: Any, result: Any) -> None:
        with self._lock:
            root_id = self._root_of.get(span_id)
            if root_id is None:
                return
            run = self._runs[root_id]
            if span_id == root_id:
                if self._await_chat_writer(run, result):
                    return
            elif instance is not None and instance is run.awaited_writer:
                result = instance  # the writer has put the whole streamed answer on its response
            else:
                self._close_child(run, span_id)
                return
            self._forget(run)
        self._conclude(run, result)

    def span_dropped(self, span_id: str, instance: Any, err: BaseException | None) -> None:
        with self._lock:
            root_id = self._root_of.get(span_id)
            if root_id is None:
                return
            run = self._runs[root_id]
            if span_id != root_id and not (instance is not None and instance is run.awaited_writer):
                self._close_child(run, span_id)
                return  # a step failed; the root may still recover and answer
            self._forget(run)
        log.debug("groundtrace: %s raised %s: not scored", run.name, type(err).__name__)

    # ---------------------------------------------------------------------------- events
    def on_event(self, event: Any) -> None:
        read = EVENT_READERS.get(type(event))
        if read is None or event.span_id is None:
            return
        with self._lock:
            root_id = self._root_of.get(event.span_id)
            if root_id is not None:
                read(self._runs[root_id], event)

    # ------------------------------------------------------------------------------- end
    def close(self) -> None:
        """Stop tracking: open roots are forgotten and streams still being read submit nothing."""
        with self._lock:
            self._closed = True
            self._runs.clear()
            self._root_of.clear()

    def _await_chat_writer(self, run: RootRun, result: Any) -> bool:
        """At the root's end (lock held): True if the answer is still being streamed by a writer."""
        if not isinstance(result, StreamingAgentChatResponse) or result.is_done or result.exception is not None:
            return False
        if result.write_response_to_history_thread is None and result.awrite_response_to_history_task is None:
            return False  # nothing will ever read it to the end: concluded as unfinished
        run.awaited_writer = result
        return True

    def _conclude(self, run: RootRun, result: Any) -> None:
        if isinstance(result, StreamingAgentChatResponse):
            if result.is_done and result.exception is None:
                self._submit(run, result.response, source_nodes(result))
            else:
                log.debug("groundtrace: the chat stream of %s did not finish: not scored", run.name)
        elif isinstance(result, StreamingResponse) and result.response_gen is not None:
            result.response_gen = follow_tokens(result.response_gen, partial(self._stream_ended, run, result))
        elif isinstance(result, AsyncStreamingResponse) and result.response_gen is not None:
            result.response_gen = follow_async_tokens(result.response_gen, partial(self._stream_ended, run, result))
        else:
            self._submit(run, answer_text(result), source_nodes(result))

    def _stream_ended(self, run: RootRun, response: Any, text: str | None) -> None:
        if text is None:
            log.debug("groundtrace: the stream of %s raised or was not read to the end: not scored", run.name)
        else:
            self._submit(run, text, source_nodes(response))

    def _submit(self, run: RootRun, answer: str | None, response_nodes: list[Any]) -> None:
        if self._closed:
            return
        try:  # this runs on the caller's thread, even inside its `for token in stream`
            record = run.to_record(answer, response_nodes, span_text=self._span_text)
            if record is None:
                log.debug("groundtrace: %s had no question or no answer: nothing to score", run.name)
                return
            self._monitor.submit(record, mask=self._mask)
        except Exception:
            log.debug("groundtrace: could not submit the record of %s", run.name, exc_info=True)

    def _close_child(self, run: RootRun, span_id: str) -> None:
        # an ended span is forgotten at once, so a long root holds only its open spans. The events
        # read here are sent inside their spans; only a streamed LLM call's end event comes after
        # its span, and a streamed answer is read from the stream itself.
        del self._root_of[span_id]
        run.open_children.discard(span_id)

    def _forget(self, run: RootRun) -> None:
        self._runs.pop(run.span_id, None)
        self._root_of.pop(run.span_id, None)
        for span_id in run.open_children:
            self._root_of.pop(span_id, None)

    def _evict_beyond_limit(self) -> int:
        evicted = 0
        while len(self._runs) > self._max_open_roots:
            self._forget(next(iter(self._runs.values())))
            evicted += 1
        return evicted
