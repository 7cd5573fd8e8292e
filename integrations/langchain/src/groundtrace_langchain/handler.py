"""GroundtraceCallbackHandler: one groundtrace Record per root run, scored off the request path.

A root run is a chain run (an LCEL chain, a LangGraph graph, any Runnable) whose parent this
handler has not seen: no parent at all, or a parent outside the handler's reach (a LangSmith
``@traceable`` function, an outer chain the handler was not attached to). Runs below it report to
it through the shared collector. Standalone retriever, LLM and tool calls are not RAG answers and
make no Record.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from groundtrace.capture.kit import end_request_span, prepare_shared_capture, shared_monitor, start_request_span
from groundtrace.config import Settings
from groundtrace.monitor import Monitor, check_sample_rate
from groundtrace.privacy import Mask, load_mask
from groundtrace.capture.carried import NOT_ITEMS, add_context_keys, may_carry_output, prompt_variables
from groundtrace.capture.explicit import claim_for_framework
from groundtrace.capture.marked import PENDING, Retrieved, current_turn, has_pending, register_finder, take_pending
from groundtrace.capture.session import current_session
from groundtrace.trace_context import current_links, otel_ids
from groundtrace.capture.turn import ToolFilter
from groundtrace.capture.stats import CaptureStats
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables.config import var_child_runnable_config

from groundtrace_langchain.collector import COLLECTOR, GUARDED, Retrieval, RootRun, log, report_failure
from groundtrace_langchain.events import (RunKey, UnreadableEvent, metadata_dict, parent_key, run_key, run_name,
                                          run_text, tag_list)
from groundtrace_langchain.extract import STEP_OUTPUTS, history_session
from groundtrace_langchain.records import NothingToScore, read_end
from groundtrace_langchain.tracer_spans import config_handlers, tracer_spans

TRACER_NAME = "groundtrace.langchain"
_scopes = itertools.count(1)
# what a start event that could not be read was: a chain's (a root, or a step whose tree must stay whole) or a
# retriever's, model's or tool's inside a root
ROOT_START, CHILD_START = "root", "child"
# the no-record reason of a root one of whose events could not be read (the WARNING says which and why)
UNREADABLE_EVENTS = "groundtrace could not read one of its events"


class GroundtraceCallbackHandler(BaseCallbackHandler):
    """Capture each root run's question, retrieved contexts and answer, and submit them to a Monitor.

    ``metrics``/``sinks`` (and any other Monitor option, e.g. ``workers=2``) build a Monitor owned by
    this handler; ``monitor=`` uses the given one; with neither, the process-wide Monitor configured
    from ``GROUNDTRACE_*`` is used (created on the first Record). ``answer_key`` names the key of a
    dict output (a LangGraph state, say) that holds the answer. ``sample_rate`` goes to the owned
    Monitor, or along with each Record to a given or shared one, which applies it with its own.
    ``mask`` (a function ``str -> str``) goes with each Record to the Monitor (owned, given or
    shared), which applies it in its worker, off the request path, before its own mask
    (GROUNDTRACE_MASK) and before any metric or sink sees the text (see groundtrace.privacy).
    ``include_tools`` (only these tool names) and ``exclude_tools`` choose whose outputs may be
    contexts (a retriever tool's documents follow their tool). ``context_keys`` names keys of a state or a
    prompt's variables that hold contexts beyond the words groundtrace knows (``["search_results"]``; process-wide,
    as GROUNDTRACE_CONTEXT_KEYS).
    """

    # Our callbacks are O(1), thread-safe and never block: run them inline in async chains instead
    # of paying a thread-pool hop per event.
    run_inline = True
    # Events we have no use for are skipped by LangChain before any call. Chat-model starts are
    # used (on_chat_model_start is implemented, so LangChain never renders prompts to text for us);
    # not ignore_agent: LangChain files tool events under it.
    ignore_retry = True
    ignore_custom_event = True
    # and the events we use, as plain class attributes: LangChain reads one per event per handler,
    # and the base class's properties are a Python call each
    ignore_llm = ignore_chain = ignore_agent = ignore_retriever = ignore_chat_model = False

    def __init__(
        self,
        metrics: Sequence[Any] | str | None = None,
        sinks: Sequence[Any] | str | None = None,
        monitor: Monitor | None = None,
        answer_key: str | None = None,
        sample_rate: float | None = None,
        mask: Mask | None = None,
        include_tools: Iterable[str] | None = None,
        exclude_tools: Iterable[str] | None = None,
        context_keys: Iterable[str] | None = None,
        **monitor_options: Any,
    ) -> None:
        if context_keys is not None:  # process-wide, as the words groundtrace knows are (GROUNDTRACE_CONTEXT_KEYS too)
            add_context_keys(context_keys)
        builds_monitor = metrics is not None or sinks is not None or bool(monitor_options)
        if monitor is not None and builds_monitor:
            raise ValueError("pass either monitor= or the options to build one (metrics, sinks, ...), not both")
        if sample_rate is not None:
            check_sample_rate(sample_rate)
        if builds_monitor:
            if sample_rate is not None:
                monitor_options["sample_rate"] = sample_rate
            # the configuration's privacy switches (GROUNDTRACE_MASK, GROUNDTRACE_CAPTURE_TEXT) hold for the
            # Monitor a handler builds, as for instrument()'s, unless the options say otherwise
            privacy = Settings.from_env()
            monitor_options.setdefault("mask", privacy.mask)
            monitor_options.setdefault("capture_text", privacy.capture_text)
            monitor = Monitor(metrics, sinks, **monitor_options)
        elif monitor is None:
            prepare_shared_capture()  # the shared Monitor comes with the first Record: its trace links now
        self._monitor = monitor
        self.owns_monitor = builds_monitor
        self.answer_key = answer_key
        self._sample_rate = None if builds_monitor else sample_rate
        self._mask = mask  # always with each Record, so that it runs before the Monitor's own mask
        self._scope = next(_scopes)
        self.tools = ToolFilter.of(include_tools, exclude_tools)
        register_finder("langchain", find_marked_turn)  # where a @groundtrace.retrieval call inside a run goes

    @property
    def monitor(self) -> Monitor:
        if self._monitor is None:
            self._monitor = shared_monitor()
        return self._monitor

    @staticmethod
    def stats() -> CaptureStats:
        """Where the root runs of every handler in this process went (see CaptureStats)."""
        return COLLECTOR.stats()

    def close(self) -> None:
        """Close the Monitor this handler built (a given or shared one is left to its owner)."""
        if self.owns_monitor and self._monitor is not None:
            self._monitor.close()

    # Every callback body runs under `try: ... except Exception: self._cannot_read(...)`, written out
    # rather than as a decorator: a wrapper would re-pack LangChain's keyword arguments on every event.

    # ---------------------------------------------------------------------------------- chains
    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            run = run_id.int if type(run_id) is UUID else run_key(run_id)
            parent = parent_run_id.int if type(parent_run_id) is UUID else parent_key(parent_run_id)
            name = kwargs.get("name")
            if type(name) is not str:
                name = run_name(name)
            if parent is None or (root := COLLECTOR.adopt(self._scope, run, parent, name)) is None:
                self._start_root(run, run_id, inputs, tags, metadata, name)
                return
            if root.config_unread:
                _read_root_config(root)
            # a prompt template's variables: a reference, read at the end; only when some variable may hold contexts
            # (by its name and length: an agent's messages do not), and not once a retriever ran (its documents come
            # first), so the usual chain and agent keep nothing more alive than they did
            if kwargs.get("run_type") == "prompt" and not root.retrievals and type(inputs) in STEP_OUTPUTS \
                    and prompt_variables(inputs, None):
                COLLECTOR.add_carried(root, None, inputs)
        except Exception:
            self._cannot_read("on_chain_start", run_id, parent_run_id, ROOT_START)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = run_id.int if type(run_id) is UUID else run_key(run_id)
            if (self._scope, run) in COLLECTOR.roots:  # most chain ends are not a root's
                root = COLLECTOR.pop_root(self._scope, run)
                if root is not None:
                    self._submit(root, outputs, kwargs.get("inputs"))
            # a step that returned Documents (a retrieval function): a reference. (A step's dict output, a
            # LangGraph state update, is read in the root's final output: one test here would cost every step.)
            elif type(outputs) is list and outputs and type(outputs[0]) not in NOT_ITEMS and may_carry_output(outputs):
                root = COLLECTOR.root_of(self._scope, run)
                if root is not None and not root.retrievals:
                    COLLECTOR.add_carried(root, run, outputs)
        except Exception:
            self._cannot_read("on_chain_end", run_id, parent_run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kwargs: Any) -> None:
        try:
            root = COLLECTOR.pop_root(self._scope, run_key(run_id))
            if root is not None:
                COLLECTOR.counts.failed("its answer is not scored")
                _settle_span(root, error, load_mask(self._mask) or self.monitor.mask)
                log.debug("groundtrace: root run %s (%s) raised %s: nothing is scored", root.run_id, root.name,
                          type(error).__name__)
        except Exception:
            self._cannot_read("on_chain_error", run_id, parent_run_id)

    # ------------------------------------------------------------------------------ retrievers
    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                           **kwargs: Any) -> None:
        try:
            if parent_run_id is not None:
                name = run_name(kwargs.get("name") or _serialized_name(serialized))
                COLLECTOR.adopt_retriever(self._scope, run_key(run_id), run_key(parent_run_id, "parent_run_id"),
                                          query if isinstance(query, str) else "", name)
        except Exception:
            self._cannot_read("on_retriever_start", run_id, parent_run_id, CHILD_START)

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID, parent_run_id: UUID | None = None,
                         **kwargs: Any) -> None:
        try:
            run = run_key(run_id)
            root = COLLECTOR.root_of(self._scope, run)
            retrieval = root.retrievals.get(run) if root is not None else None
            if retrieval is not None:  # copies as they were now: the app may reuse or change its objects later
                retrieval.documents = [_snapshot(document) for document in documents]
        except Exception:
            self._cannot_read("on_retriever_end", run_id, parent_run_id)

    # -------------------------------------------------------------------------------- models
    # A model call's input and output are stored as LangChain gave them; records.py renders only
    # the call that wrote the answer, once the root ends.
    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start_call(run_id, parent_run_id, messages, "on_chat_model_start", kwargs)

    def on_llm_start(self, serialized: Any, prompts: list[str], *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        self._start_call(run_id, parent_run_id, prompts, "on_llm_start", kwargs)

    def _start_call(self, run_id: UUID, parent_run_id: UUID | None, model_input: Any, event: str,
                    kwargs: dict[str, Any]) -> None:
        try:
            run = run_id.int if type(run_id) is UUID else run_key(run_id)
            if parent_run_id is None:  # a model called by hand: a turn only after a @groundtrace.retrieval call
                if has_pending() and (marked := take_pending(model_input)):  # this call's, if given their text
                    self._start_root(run, run_id, model_input, kwargs.get("tags"), kwargs.get("metadata"),
                                     run_name(kwargs.get("name")) or "model call", marked)
                    root = COLLECTOR.root_of(self._scope, run)
                    if root is not None:
                        root.pending[run] = root.turn.start_call(model_input)
                return
            root = COLLECTOR.root_of(self._scope, parent_run_id.int if type(parent_run_id) is UUID
                                     else parent_key(parent_run_id))
            if root is not None:
                if root.config_unread:  # a model call as the root's first child
                    _read_root_config(root)
                root.pending[run] = root.turn.start_call(model_input)
        except Exception:
            self._cannot_read(event, run_id, parent_run_id, CHILD_START)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None,
                   **kwargs: Any) -> None:
        try:
            run = run_id.int if type(run_id) is UUID else run_key(run_id)
            if parent_run_id is None:  # a model called by hand after a @groundtrace.retrieval call: a root
                self._end_model_root(response, run)
                return
            root = COLLECTOR.root_of(self._scope, parent_run_id.int if type(parent_run_id) is UUID
                                     else parent_key(parent_run_id))
            call = root.pending.pop(run, None) if root is not None else None
            if call is not None:
                call.output = response
        except Exception:
            self._cannot_read("on_llm_end", run_id, parent_run_id)

    def _end_model_root(self, response: LLMResult, run: RunKey) -> None:
        root = COLLECTOR.pop_root(self._scope, run)
        call = root.pending.pop(run, None) if root is not None else None
        if root is not None and call is not None:
            call.output = response
            self._submit(root, None, None)  # its answer is its generation

    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        try:
            run, parent = run_key(run_id), parent_key(parent_run_id)
            root = COLLECTOR.root_of(self._scope, parent if parent is not None else run)
            if root is not None:
                root.pending.pop(run, None)
            if parent_run_id is None:
                self.on_chain_error(error, run_id=run_id)
        except Exception:
            self._cannot_read("on_llm_error", run_id, parent_run_id)

    # --------------------------------------------------------------------------------- tools
    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        try:
            # a tool may run a retriever (agentic RAG): its runs must find their root through it
            if parent_run_id is not None:
                name = run_name(_serialized_name(serialized) or kwargs.get("name"))
                arguments = kwargs.get("inputs")
                call_id = kwargs.get("tool_call_id")
                COLLECTOR.adopt_tool(self._scope, run_key(run_id), run_key(parent_run_id, "parent_run_id"), name,
                                     input_str if arguments is None else arguments,
                                     call_id if isinstance(call_id, str) else None)
        except Exception:
            self._cannot_read("on_tool_start", run_id, parent_run_id, CHILD_START)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        try:
            run = run_key(run_id)
            root = COLLECTOR.root_of(self._scope, run)
            tool = root.tools.get(run) if root is not None else None
            if tool is not None:  # the exception's type only: its traceback would hold the tool's frames
                tool.failed = type(error).__name__
        except Exception:
            self._cannot_read("on_tool_error", run_id, parent_run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = run_key(run_id)
            root = COLLECTOR.root_of(self._scope, run)
            tool = root.tools.get(run) if root is not None else None
            if tool is not None:
                tool.output = output
        except Exception:
            self._cannot_read("on_tool_end", run_id, parent_run_id)

    # ----------------------------------------------------------------------- what cannot be read
    def _cannot_read(self, event: str, run_id: Any, parent_run_id: Any, start: str | None = None) -> None:
        """An event that failed (its arguments unreadable, or a failure of ours): the root it belongs to makes no
        Record, and a start keeps its run in that root's tree, so that its own children are not taken for roots
        (a chain start with no tracked root becomes a root that will make none). Said once per cause."""
        error = sys.exc_info()[1]
        cause = error.cause if isinstance(error, UnreadableEvent) else None
        try:
            run, parent = _key_or_none(run_id), _key_or_none(parent_run_id)
            root = COLLECTOR.root_of(self._scope, run) or COLLECTOR.root_of(self._scope, parent)
            if root is not None:
                if root.unreadable is None:
                    root.unreadable = f"{event}: {cause or type(error).__name__}"
                if start is not None and run is not None and parent is not None \
                        and COLLECTOR.root_of(self._scope, run) is None:
                    COLLECTOR.adopt(self._scope, run, parent)
            elif start == ROOT_START and run is not None:
                COLLECTOR.add_root(self._scope, RootRun(
                    run_id=str(run), key=run, name=None, inputs=None, tags=[], metadata={}, excluded=True,
                    otel_ids=None, links={}, unreadable=f"{event}: {cause or type(error).__name__}"))
        except Exception:
            pass  # what could be read is counted below all the same
        report_failure(event, cause)

    # ---------------------------------------------------------------------------------- roots
    def _start_root(self, run: RunKey, run_id: Any, inputs: Any, tags: Any, metadata: Any,
                    name: str | None, marked: list[Retrieved] | None = None) -> None:
        """``run``: the root's key; ``run_id``: its id as LangChain gave it. ``marked``: @groundtrace.retrieval
        calls made just before, outside any turn, taken already (else taken here): this turn's retrievals."""
        metadata = metadata_dict(metadata)
        excluded = bool(metadata) and Monitor.excludes(metadata)  # an excluded run starts no span, reads no links
        ids = None if excluded else otel_ids()  # the application's span, if one is current
        # the conversation: only groundtrace.session() must be read now (a context variable); the
        # run metadata's thread_id and session_id are read from the root's copy, off this thread
        root = RootRun(
            run_id=str(run_id) if type(run_id) is UUID else run_text(run_id), key=run, name=name, inputs=inputs,
            tags=tag_list(tags), metadata=metadata, excluded=excluded, otel_ids=ids, started_ns=time.time_ns(),
            links={} if excluded else current_links(), given_session=current_session(), given_id=run_id,
        )
        if marked is None and PENDING.get():  # (the ContextVar itself: this runs on every request)
            marked = take_pending(inputs)  # a chain given the passages it was retrieved (its inputs hold them)
        for retrieved in marked or ():
            root.sources.append(Retrieval(id(retrieved), retrieved.name, retrieved.query or "", None, False,
                                          marked=retrieved))
        COLLECTOR.add_root(self._scope, root)  # evicted roots started no span: nothing to end

    # ------------------------------------------------------------------------------ submitting
    def _submit(self, root: RootRun, outputs: Any, end_inputs: Any) -> None:
        """Score a root that ended (it is no longer tracked): every way out is counted once.

        Here, on the application's thread, only what cannot wait is read (read_end); the Record
        itself is built by the Monitor's worker, and only if the Monitor keeps it. A root one of whose
        events could not be read makes none: never a Record from part of its tree."""
        if root.unreadable is not None:
            COLLECTOR.counts.no_record(UNREADABLE_EVENTS, root.unreadable, warn=True)
            self.monitor.note_no_record(UNREADABLE_EVENTS)
            return
        try:
            _settle_span(root)
            if root.tools:  # for the later turns of its thread, which read these outputs again
                COLLECTOR.ended.append((root.run_id, root.tools))
            record = read_end(root, outputs, end_inputs, self.answer_key, self.tools)
            guarded = GUARDED.get(root.run_id)
            if guarded is not None and self._monitor is not guarded.capture and guarded.adopt(self.monitor):
                guarded.mask = self._mask  # a guard checks this run: its Score goes to this Monitor, scored once
            else:  # the Monitor samples and counts exclusions; an excluded Record carries the run's flag
                self.monitor.submit(record, sample_rate=self._sample_rate, mask=self._mask)
        except NothingToScore as nothing:
            COLLECTOR.counts.no_record(nothing.reason, nothing.hint, warn=nothing.called_model)
            if not root.excluded:  # the Monitor's exit summary counts the turns that made no record
                self.monitor.note_no_record(nothing.reason)
            log.debug("groundtrace: root run %s (%s): %s: no record", root.run_id, root.name, nothing.reason)
            return
        except Exception:
            COLLECTOR.counts.unreadable()  # and _report_failure counts the callback error
            raise
        COLLECTOR.counts.recorded(root.excluded)
        if current_turn.get() is not None:  # a groundtrace.turn around this root: this root's Record is that turn's
            claim_for_framework()


def _read_root_config(root: RootRun) -> None:
    """At the root's first child, whose config is the root's: its conversation, and the spans tracers opened
    for the root (every tracer has seen the root start by now, whatever the order of the handlers)."""
    root.config_unread = False
    config = var_child_runnable_config.get()
    root.history_session = history_session(config)
    if not root.excluded:
        _adopt_tracer_spans(root, config_handlers(config))


def _adopt_tracer_spans(root: RootRun, handlers: list[Any]) -> None:
    found = tracer_spans(handlers, _tracer_keys(root))
    if found.ids is not None:  # the tracer's span of this very run: its trace is the request's
        root.otel_ids = found.ids
    elif root.otel_ids is None:  # a tracer that makes its span current (MLflow, Langfuse, OpenLLMetry)
        root.otel_ids = otel_ids()
    root.links.update(found.links)


def _settle_span(root: RootRun, error: BaseException | None = None, mask: Any = None) -> None:
    """At the root's end: the span its scores go on. When nothing traced the request (no current span, no
    tracer's), the adapter's own ``invoke_workflow {name}`` span, from the root's start to now, if an SDK
    is installed: one trace per request, never a second one beside a tracer's."""
    if root.excluded:
        return
    if root.config_unread:  # a root with no child (a model called by hand): its tracers are read now
        _adopt_tracer_spans(root, [])
    if root.otel_ids is not None:
        return
    span = start_request_span(TRACER_NAME, lambda: {"openinference.span.kind": "CHAIN",
                                                    "groundtrace.run_id": str(root.run_id)},
                              workflow=root.name, start_time=root.started_ns)
    if span is not None:
        root.otel_ids = otel_ids(span)
        end_request_span(span, error, mask=mask)


def find_marked_turn(retrieved: Retrieved) -> bool:
    """The finder of @groundtrace.retrieval calls (groundtrace.capture.explicit): a call made inside a run a
    GroundtraceCallbackHandler tracks is a retrieval of that run's root. LangChain's own context says which
    run the caller is in: the config its child runs get names that run as their parent, and the handlers."""
    config = var_child_runnable_config.get()
    callbacks = config.get("callbacks") if config else None
    parent = _key_or_none(getattr(callbacks, "parent_run_id", None))
    if parent is None:
        return False
    return any(COLLECTOR.add_marked(handler._scope, parent, retrieved)
               for handler in getattr(callbacks, "handlers", ()) if isinstance(handler, GroundtraceCallbackHandler))


def _key_or_none(value: Any) -> RunKey | None:
    try:
        return None if value is None else run_key(value)
    except UnreadableEvent:
        return None


def _tracer_keys(root: RootRun) -> tuple[Any, ...]:
    """The forms a tracer may have filed the root's run under: as LangChain gave it, and as a UUID."""
    given = root.given_id
    if type(given) is UUID:
        return (given,)
    return (given, UUID(int=root.key)) if type(root.key) is int and root.key < 1 << 128 else (given,)


def _serialized_name(serialized: Any) -> Any:
    return serialized.get("name") if isinstance(serialized, dict) else None


def _snapshot(document: Document) -> Document:
    """A retrieved document as it was when the retriever returned (its text and a copy of its metadata)."""
    if not isinstance(document, Document):
        return document
    return Document(page_content=document.page_content, metadata=dict(document.metadata or {}),
                    id=getattr(document, "id", None))
