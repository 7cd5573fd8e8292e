"""RootTracker: follows every LlamaIndex root span (one user turn) to its end and submits one Record per turn.

A root is a span that starts with no LlamaIndex span around it: ``query``, ``chat``,
``stream_chat``, their async twins, a workflow's or an agent's run (``FunctionAgent.run-…``,
``AgentWorkflow.run-…``, ``MyWorkflow.run-…``: the span the workflow runtime opens around all its
steps), or a function of the application decorated with ``dispatcher.span``. Each later span and
event is filed under its root by span id, so concurrent requests (threads, asyncio tasks) never
mix. A root ends:

- with its span, when the result is final (Response, AgentChatResponse, a string, a workflow's StopEvent);
- when the caller has read a StreamingResponse / AsyncStreamingResponse to its end (the LLM only
  runs while the stream is read, after the root span is over);
- when LlamaIndex's writer thread or task has read a chat stream (StreamingAgentChatResponse) to
  its end: the ``write_response_to_history`` span that is a child of the root.

A root that raises, a stream that raises or is left unread, and a turn with no question, no answer
or nothing to score are not scored: each is counted in stats() (groundtrace.capture.stats.CaptureStats,
the shape the LangChain integration reports too) and said once at INFO level.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import Any

from groundtrace.monitor import Monitor
from groundtrace.privacy import Mask
from groundtrace.redaction import failure_text, get_logger
from groundtrace.capture.explicit import claim_for_framework
from groundtrace.capture.marked import Retrieved, has_pending, register_finder, take_pending, unregister_finder
from groundtrace.capture.turn import ToolFilter
from groundtrace.capture.stats import CaptureCounter, CaptureStats
from llama_index.core.agent.workflow.workflow_events import ToolCallResult
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
    LLMPredictStartEvent,
    LLMStructuredPredictStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.span import active_span_id
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.tools.types import BaseTool, ToolOutput
from workflows import Workflow

from groundtrace.capture.earlier_turns import EarlierCalls
from groundtrace_llamaindex.extract import answer_text, final_result, llm_output_text, query_text
from groundtrace_llamaindex.run import (
    EVERY_TOOL,
    EVICTED_HINT,
    HINTS,
    LLM_END,
    MODEL_ONLY,
    QUERY_END,
    STREAM_UNFINISHED,
    SYNTHESIZE_END,
    UNREADABLE_EVENTS,
    RootRun,
)
from groundtrace_llamaindex.events import UnreadableEvent
from groundtrace_llamaindex.streams import follow_async_tokens, follow_tokens

# a guard wrapping the engine that runs now (groundtrace_llamaindex.guarded.GuardedTurn): the turn's Record goes to
# it, and its Score to this tracker's Monitor, instead of the Monitor scoring the answer again
GUARDING: ContextVar[Any] = ContextVar("groundtrace_llamaindex_guarding", default=None)

log = get_logger("groundtrace.llamaindex")

# Roots whose end never comes (a chat stream whose writer task never ran) must not pile up forever;
# far above any real number of requests in flight in one process.
MAX_OPEN_ROOTS = 10_000
FINDER = "llamaindex"  # the name this integration's finder of @groundtrace.retrieval calls is registered by
NO_SCOPE: tuple[str | None, str | None] = (None, None)
_PLAIN, _LLM, _TOOL, _POSTPROCESSOR, _WORKFLOW, _EMBEDDING, _RETRIEVER = 0, 1, 2, 3, 4, 5, 6
_KINDS = ((BaseLLM, _LLM), (BaseTool, _TOOL), (BaseNodePostprocessor, _POSTPROCESSOR), (Workflow, _WORKFLOW),
          (BaseEmbedding, _EMBEDDING), (BaseRetriever, _RETRIEVER))
# the kinds whose spans scope what runs inside them (an LLM call, a tool call, ...); an embedding's or a
# retriever's kind matters only when it is a root
_SCOPING = frozenset({_LLM, _TOOL, _POSTPROCESSOR, _WORKFLOW})


class RootTracker:
    """``mask`` goes with each Record to the Monitor, which applies it off the request path;
    ``tools`` says which tools' outputs may be contexts."""

    def __init__(self, monitor: Monitor, *, max_open_roots: int = MAX_OPEN_ROOTS, mask: Mask | None = None,
                 tools: ToolFilter = EVERY_TOOL) -> None:
        self._monitor = monitor
        self._mask = mask
        self._tools = tools
        # the request span this adapter may write carries the text only where nothing hides it
        self._span_text = monitor.shows_raw_text and mask is None
        self._max_open_roots = max_open_roots
        self._lock = threading.Lock()
        self._runs: dict[str, RootRun] = {}  # root span id -> run, oldest first
        self._root_of: dict[str, RootRun] = {}  # span id (roots included) -> its root's run
        # only spans inside a tool call or an LLM call: span id -> (tool call span, outermost LLM span)
        self._scope_of: dict[str, tuple[str | None, str | None]] = {}
        # a model call's span whose end event is still to come: a stream's comes after its span ended
        self._awaiting: dict[str, RootRun] = {}
        self._kinds: dict[type, int] = {type(None): _PLAIN}
        self._closed = False
        self._warned_full = False
        self._said_unreadable: set[tuple[str, str]] = set()
        self._counts = CaptureCounter("LlamaIndex")  # where every root went: see stats()
        self._streams_open = 0  # roots whose answer streams to a caller who has not finished reading it
        self._earlier = EarlierCalls()  # the agent tool calls of ended turns, which later turns read from memory
        register_finder(FINDER, self._file_marked)  # where a @groundtrace.retrieval call inside a root goes

    @property
    def open_roots(self) -> int:
        return len(self._runs)

    @property
    def tracked_spans(self) -> int:
        return len(self._root_of) + len(self._awaiting)

    def stats(self) -> CaptureStats:
        """Where every root went; ``in_flight`` counts open roots and streams not read to their end."""
        with self._lock:
            in_flight = len(self._runs) + self._streams_open
        return self._counts.snapshot(in_flight)

    def callback_failed(self) -> None:
        """A handler's call into this tracker failed (logged there): counted, never raised."""
        self._counts.callback_error()

    def cannot_read(self, event: str, span_id: Any, parent_id: Any = None) -> None:
        """A span or event a handler could not read (its arguments, or a failure of ours): the run it belongs to
        makes no Record, and a span that could not start stays in that run's tree, so that what runs inside it
        is still that run's. Counted in callback_errors, said at WARNING once per cause."""
        error = sys.exc_info()[1]
        cause = error.cause if isinstance(error, UnreadableEvent) else type(error).__name__
        self._counts.callback_error()
        run = _tracked(self._root_of, span_id) or _tracked(self._root_of, parent_id) or _tracked(self._awaiting, span_id)
        if run is not None:
            if run.unreadable is None:
                run.unreadable = f"{event}: {cause}"
            if event == "span start" and type(span_id) is str and not run.closed:
                self._root_of[span_id] = run
                run.open_children.add(span_id)
        if (event, cause) not in self._said_unreadable:
            self._said_unreadable.add((event, cause))
            log.warning("groundtrace: LlamaIndex: %s could not be read (%s): the run it belongs to makes no record "
                        "(said once per cause; counted in stats().callback_errors and no_record)", event, cause)

    # ----------------------------------------------------------------------------- spans
    # A root's start and end, and every event read, hold the lock. A child span's start and end
    # (most of the calls) take none: each dict and set operation is atomic, and a run forgotten
    # meanwhile (``closed`` is set before its spans go) is seen after the span was filed, which
    # then removes itself.
    def span_started(self, span_id: str, parent_id: str | None, arguments: dict[str, Any],
                     tags: dict[str, Any] | None, instance: Any = None) -> bool:
        """File a new span under its root; True if it is tracked."""
        if self._closed:
            return False
        kind = self._kinds.get(type(instance))  # a dict read for every class seen before
        if kind is None:
            kind = self._kind(instance)
        if parent_id is None:
            self._start_root(span_id, arguments, tags, instance, kind)
            return True
        run = self._root_of.get(parent_id)
        if run is None:  # under a span that began before instrument(), or already ended
            return False
        self._root_of[span_id] = run
        run.open_children.add(span_id)
        if run.tracers_unread:  # the root's first child: every handler has opened the root's span by now
            run.read_tracers()
        if kind in _SCOPING or parent_id in self._scope_of:  # most spans are neither in nor of a tool or LLM
            with self._lock:
                self._enter_scope(run, span_id, self._scope_of.get(parent_id, NO_SCOPE), kind, instance, arguments)
        if run.closed:
            self._root_of.pop(span_id, None)
            self._scope_of.pop(span_id, None)
        return True

    def _start_root(self, span_id: str, arguments: dict[str, Any], tags: dict[str, Any] | None, instance: Any,
                    kind: int) -> None:
        run = RootRun.start(span_id, arguments, tags, instance, workflow=kind == _WORKFLOW)
        # an embedding's or a retriever's own call: a step called by hand, no one's turn (its query is no question)
        run.component_root = kind == _EMBEDDING or kind == _RETRIEVER
        # a model called by hand; not one an engine's stream runs as the caller reads it (after its root ended)
        if kind == _LLM and not self._streams_open:
            run.model_root = True
            if has_pending():  # retrieve, then call the model: @groundtrace.retrieval calls made just before
                for retrieved in take_pending(arguments):  # the call's, if its messages hold their text
                    run.note_marked(retrieved, None)
        with self._lock:
            self._counts.root()
            self._runs[span_id] = run
            self._root_of[span_id] = run
            if kind in _SCOPING:
                self._enter_scope(run, span_id, NO_SCOPE, kind, instance, arguments)
            evicted = self._evict_beyond_limit()
        if evicted:
            self._counts.evicted(evicted, EVICTED_HINT)
            if not self._warned_full:
                self._warned_full = True
                log.warning("groundtrace: more than %d LlamaIndex requests open at once; the oldest are "
                            "dropped unscored", self._max_open_roots)

    def span_exited(self, span_id: str, instance: Any, result: Any) -> None:
        run = self._root_of.get(span_id)
        if run is None:
            return
        if span_id != run.span_id and (instance is None or instance is not run.awaited_writer):
            self._read_child_result(run, span_id, instance, result)
            self._close_child(run, span_id)
            return
        with self._lock:
            if self._root_of.get(span_id) is not run:  # concluded meanwhile
                return
            if span_id == run.span_id:
                if self._await_chat_writer(run, result):
                    return
            else:
                result = instance  # the writer has put the whole streamed answer on its response
            self._forget(run)
        try:
            self._conclude(run, result)
        except Exception:
            self._unreadable(run)

    def span_dropped(self, span_id: str, instance: Any, err: BaseException | None) -> None:
        run = self._root_of.get(span_id)
        if run is None:
            return
        if span_id != run.span_id and (instance is None or instance is not run.awaited_writer):
            self._close_child(run, span_id)
            return  # a step failed; the root may still recover and answer
        with self._lock:
            if self._root_of.get(span_id) is not run:
                return
            self._forget(run)
        log.debug("groundtrace: %s raised %s: not scored", run.name, type(err).__name__)
        self._counts.failed("its answer is not scored")

    # ---------------------------------------------------------------------------- events
    def on_event(self, event: Any, read: EventReader | None = None) -> None:
        """File an event's content under its run; ``read``: its reader, if the caller looked it up."""
        if read is None:
            read = EVENT_READERS.get(type(event))
        span_id = event.span_id
        if read is None or span_id is None:
            return
        with self._lock:
            run = self._root_of.get(span_id) or self._awaiting.get(span_id)
            if run is not None and not run.closed:
                read(self, run, span_id, event)

    def _start_call(self, run: RootRun, span_id: str, model_input: Any) -> None:
        llm_span = self._scope_of.get(span_id, NO_SCOPE)[1] or span_id
        if run.start_call(span_id, llm_span, model_input):
            self._awaiting[span_id] = run

    def _end_call(self, run: RootRun, span_id: str, response: Any) -> None:
        if run.end_call(span_id, response):  # False for a nested wrapper's end (the same response)
            self._awaiting.pop(span_id, None)
            if not run.workflow:  # a workflow's answer is its result, never a model call's output
                run.note_answer(llm_output_text(response), LLM_END)

    def _read_child_result(self, run: RootRun, span_id: str, instance: Any, result: Any) -> None:
        """A tool call's output, an agent's tool call result (the call's id, and its error output
        when the tool raised), or the nodes a postprocessor kept (with a reranker's scores)."""
        if isinstance(result, ToolOutput):
            if self._scope_of.get(span_id, NO_SCOPE)[0] == span_id:  # the outermost tool call
                run.note_tool_output(span_id, result)
        elif isinstance(result, ToolCallResult):  # an agent's call_tool step
            with self._lock:
                run.note_tool_result(result)
        elif type(result) is list and self._kind(instance) == _POSTPROCESSOR:
            run.note_nodes(result, self._tool_call_of(span_id))

    def _tool_call_of(self, span_id: str) -> str | None:
        return self._scope_of.get(span_id, NO_SCOPE)[0]

    def _file_marked(self, retrieved: Retrieved) -> bool:
        """The finder of @groundtrace.retrieval calls (groundtrace.capture.explicit): a call made inside a
        span this tracker follows is a retrieval of that span's root (LlamaIndex's active span says which)."""
        span_id = active_span_id.get()
        if span_id is None or self._closed:
            return False
        with self._lock:
            run = self._root_of.get(span_id)
            if run is None or run.closed:
                return False
            run.note_marked(retrieved, self._tool_call_of(span_id))
        return True

    # ------------------------------------------------------------------------------- end
    def close(self) -> None:
        """Stop tracking: open roots are forgotten and streams still being read submit nothing."""
        unregister_finder(FINDER, self._file_marked)
        with self._lock:
            self._closed = True
            self._runs.clear()
            self._root_of.clear()
            self._scope_of.clear()
            self._awaiting.clear()

    def _await_chat_writer(self, run: RootRun, result: Any) -> bool:
        """At the root's end (lock held): True if the answer is still being streamed by a writer."""
        if not isinstance(result, StreamingAgentChatResponse) or result.is_done or result.exception is not None:
            return False
        if result.write_response_to_history_thread is None and result.awrite_response_to_history_task is None:
            return False  # nothing will ever read it to the end: concluded as unfinished
        run.awaited_writer = result
        return True

    def _conclude(self, run: RootRun, result: Any) -> None:
        final = final_result(result)  # a workflow's StopEvent holds what the caller gets
        if isinstance(final, StreamingAgentChatResponse):
            if final.is_done and final.exception is None:
                self._submit(run, final.response, final)
            else:
                log.debug("groundtrace: the chat stream of %s did not finish: not scored", run.name)
                self._no_record(STREAM_UNFINISHED)
        elif isinstance(final, StreamingResponse) and final.response_gen is not None:
            final.response_gen = follow_tokens(final.response_gen, partial(self._stream_ended, run, final))
            self._stream_opened()
        elif isinstance(final, AsyncStreamingResponse) and final.response_gen is not None:
            final.response_gen = follow_async_tokens(final.response_gen, partial(self._stream_ended, run, final))
            self._stream_opened()
        else:
            self._submit(run, answer_text(final), final)

    def _stream_opened(self) -> None:
        with self._lock:
            self._streams_open += 1

    def _stream_ended(self, run: RootRun, response: Any, text: str | None) -> None:
        with self._lock:
            self._streams_open -= 1
        if text is None:
            log.debug("groundtrace: the stream of %s raised or was not read to the end: not scored", run.name)
            self._no_record(STREAM_UNFINISHED)
        else:
            self._submit(run, text, response, streamed=True)

    def _submit(self, run: RootRun, answer: str | None, result: Any, streamed: bool = False) -> None:
        if self._closed:
            return
        if run.unreadable is not None:
            self._no_record(UNREADABLE_EVENTS, warn=True)
            return
        try:  # this runs on the caller's thread, even inside its `for token in stream`
            if streamed and answer is not None:
                run.note_streamed_answer(answer)
            if run.tool_calls:
                with self._lock:
                    run.remember_tool_calls(self._earlier)
            if run.component_root or not run.is_turn():
                if run.model_root and run.turn.calls:  # a model called by hand: said, with the fix
                    self._no_record(MODEL_ONLY, warn=True)
                else:
                    self._counts.not_turn()
                return
            # the Record itself is built by the Monitor's worker, and only if the Monitor keeps it
            record = run.read_end(answer, result, self._tools, span_text=self._span_text, on_failure=self.callback_failed,
                                  earlier=self._earlier)
            if isinstance(record, str):
                log.debug("groundtrace: %s made no record: %s", run.name, record)
                self._no_record(record, warn=bool(run.turn.calls))
                return
            guarding = GUARDING.get()
            if guarding is None or not guarding.adopt(record, self._monitor, self._mask):
                self._monitor.submit(record, mask=self._mask)
        except Exception:
            self._unreadable(run)
            return
        self._counts.recorded(run.excluded)
        claim_for_framework()  # a groundtrace.turn around this root: this Record is that turn's

    def _unreadable(self, run: RootRun) -> None:
        """groundtrace failed at a root's end (on the caller's thread, maybe in its `for token in
        stream`): logged, counted as a root with no record and as a callback error, never raised."""
        try:
            log.debug("groundtrace: could not read the end of %s: %s", run.name, failure_text(sys.exc_info()[1]))
            self._counts.unreadable()
            self._counts.callback_error()
        except Exception:
            pass

    def _no_record(self, reason: str, warn: bool = False) -> None:
        """``warn``: the turn called a model (an answer groundtrace could not read): said at WARNING."""
        try:  # called on the caller's thread too (a stream's end): never raises into it
            self._counts.no_record(reason, HINTS.get(reason, ""), warn)
            self._monitor.note_no_record(reason)
        except Exception:
            log.debug("groundtrace: could not count a turn with no record: %s", failure_text(sys.exc_info()[1]))

    # ------------------------------------------------------------------ bookkeeping (lock held)
    def _kind(self, instance: Any) -> int:
        if instance is None:
            return _PLAIN
        cls = type(instance)
        kind = self._kinds.get(cls)
        if kind is None:  # one isinstance pair per class, then a dict lookup
            kind = next((kind for base, kind in _KINDS if isinstance(instance, base)), _PLAIN)
            self._kinds[cls] = kind
        return kind

    def _enter_scope(self, run: RootRun, span_id: str, scope: tuple[str | None, str | None], kind: int,
                     instance: Any, arguments: dict[str, Any]) -> None:
        tool, llm = scope
        if kind == _LLM and llm is None:
            llm = span_id
        elif kind == _TOOL and tool is None:  # a tool called inside a tool belongs to the outer call
            tool = span_id
            run.note_tool_call(span_id, tool_name(instance), arguments)
        if tool is not None or llm is not None:
            self._scope_of[span_id] = (tool, llm)

    def _close_child(self, run: RootRun, span_id: str) -> None:
        # an ended span is forgotten at once, so a long root holds only its open spans. The events
        # read here are sent inside their spans, except a streamed LLM call's end event, which comes
        # after its span: that call is found through _awaiting.
        self._root_of.pop(span_id, None)
        if self._scope_of:
            self._scope_of.pop(span_id, None)
        run.open_children.discard(span_id)

    def _forget(self, run: RootRun) -> None:
        run.closed = True  # first: a child span filed meanwhile (without the lock) sees it and goes
        self._runs.pop(run.span_id, None)
        self._root_of.pop(run.span_id, None)
        self._scope_of.pop(run.span_id, None)
        for span_id in tuple(run.open_children):  # a copy: a child may be filed while this runs
            self._root_of.pop(span_id, None)
            self._scope_of.pop(span_id, None)
        for span_id in run.pending:
            self._awaiting.pop(span_id, None)

    def _evict_beyond_limit(self) -> int:
        evicted = 0
        while len(self._runs) > self._max_open_roots:
            self._forget(next(iter(self._runs.values())))
            evicted += 1
        return evicted


def _tracked(spans: dict[str, RootRun], span_id: Any) -> RootRun | None:
    return spans.get(span_id) if type(span_id) is str else None


def tool_name(tool: Any) -> str | None:
    try:
        name = tool.metadata.name
    except Exception:
        return None
    return name if isinstance(name, str) else None


EventReader = Callable[["RootTracker", RootRun, str, Any], None]
# The events that carry something for the Record; every other event is ignored at one dict lookup.
# Each reader runs with the tracker's lock held.
EVENT_READERS: dict[type, EventReader] = {
    QueryStartEvent: lambda t, run, s, e: run.note_question(query_text(e.query)),
    RetrievalStartEvent: lambda t, run, s, e: run.note_question(query_text(e.str_or_query_bundle)),
    RetrievalEndEvent: lambda t, run, s, e: run.note_nodes(e.nodes, t._tool_call_of(s)),
    ReRankEndEvent: lambda t, run, s, e: run.note_nodes(e.nodes, t._tool_call_of(s)),
    QueryEndEvent: lambda t, run, s, e: run.note_answer(answer_text(e.response), QUERY_END, query_text(e.query)),
    SynthesizeEndEvent: lambda t, run, s, e: run.note_answer(answer_text(e.response), SYNTHESIZE_END,
                                                             query_text(e.query)),
    LLMCompletionStartEvent: lambda t, run, s, e: t._start_call(run, s, e.prompt),
    LLMChatStartEvent: lambda t, run, s, e: t._start_call(run, s, e.messages),
    LLMCompletionEndEvent: lambda t, run, s, e: t._end_call(run, s, e.response),
    LLMChatEndEvent: lambda t, run, s, e: t._end_call(run, s, e.response),
    LLMPredictStartEvent: lambda t, run, s, e: run.note_prompt(e.template, e.template_args),
    LLMStructuredPredictStartEvent: lambda t, run, s, e: run.note_prompt(e.template, e.template_args),
}
