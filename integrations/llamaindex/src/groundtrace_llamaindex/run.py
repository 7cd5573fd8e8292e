"""RootRun: what one root span (one user turn) has shown so far, and the Record it becomes when it ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundtrace.capture.kit import end_request_span, start_request_span
from groundtrace.record import EXCLUDED, NOT_EXCLUDED, PendingRecord, Record, bounded
from groundtrace.redaction import failure_text, get_logger
from groundtrace.capture.session import current_session
from groundtrace.trace_context import current_links, otel_ids
from groundtrace.capture.carried import prompt_variables
from groundtrace.capture.marked import Retrieved
from groundtrace.capture.turn import ModelCall, ToolFilter, Turn
from llama_index.core.agent.workflow import AgentWorkflow
from llama_index.core.schema import NodeWithScore
from workflows import Workflow

from groundtrace_llamaindex.contexts import CHARS, MARKED, NODES, TOOL_OUTPUT, choose_contexts, tool_output_text
from groundtrace.capture.earlier_turns import EarlierCalls
from groundtrace_llamaindex.exclusion import is_excluded
from groundtrace_llamaindex.tracer_spans import tracer_span_ids
from groundtrace_llamaindex.extract import (
    input_text,
    last_user_message,
    llm_output_text,
    response_id,
    root_session_id,
    source_nodes,
    start_event_question,
    tool_query,
)

log = get_logger("groundtrace.llamaindex")
_reported: set[str] = set()  # kinds of failure to build a Record, said once each

# How much an event's answer is trusted when the root's own result carries none: the outermost
# query's end is the final answer; a synthesis or a bare LLM call may be an intermediate step.
QUERY_END, SYNTHESIZE_END, LLM_END = 3, 2, 1
TRACER_NAME = "groundtrace_llamaindex"
# Span ids are "Class.method-<uuid4>"; the uuid with its dash is 37 characters.
_UUID_SUFFIX = 37
# AgentWorkflow's own tool for passing the turn to another agent: control flow, never a context
HANDOFF_TOOL = "handoff"
EVERY_TOOL = ToolFilter()  # no include_tools / exclude_tools: every tool's output may be a context
MAX_PROMPTS = 64  # a long agent loop keeps its first prompts' variables (the carried path is for simple RAG)

# Why a turn made no Record (counted per reason in stats(), said once at INFO level)
NO_QUESTION = "no question"
NO_ANSWER = "no answer"
NOTHING_TO_SCORE = "no retrieval and no tool output"
STREAM_UNFINISHED = "its stream raised or was not read to the end"
# one of the run's spans or events could not be read (said at WARNING, once per cause, by the tracker)
UNREADABLE_EVENTS = "groundtrace could not read one of its events"
# a model called by hand (llm.complete / llm.chat with no engine, agent or workflow around it) after no
# @groundtrace.retrieval call: whatever it answered from (a vector store queried by hand, an f-string) is unseen
MODEL_ONLY = "a model call with no engine, agent or workflow around it"
FIX = "decorate your retrieval function with @groundtrace.retrieval (docs: troubleshooting, 'I see no scores')"
HINTS = {
    NO_QUESTION: "its input names no user message (docs: Integrations, LlamaIndex, 'What is captured')",
    NO_ANSWER: "its result is no text (docs: Integrations, LlamaIndex, 'What is captured')",
    NOTHING_TO_SCORE: "no retriever, tool or prompt variable held its contexts: if it answered from text retrieved "
                      "by your own code, " + FIX,
    MODEL_ONLY: "if it answered from text your code retrieved (a vector store queried by hand), " + FIX
                + "; if it is no RAG answer, nothing is missing",
    UNREADABLE_EVENTS: "the WARNING 'could not be read' says which and why",
}
EVICTED_HINT = "too many requests open at once: the oldest open requests are dropped unscored"


def span_name(span_id: str) -> str:
    return span_id[:-_UUID_SUFFIX] if len(span_id) > _UUID_SUFFIX else span_id


@dataclass(eq=False)
class RootRun:
    span_id: str
    started_ns: int
    excluded: bool
    trace_ids: tuple[str, str] | None
    trace_links: dict[str, str]
    question: str | None = None  # the root call's own input (a chat message, a query, a user_msg)
    # a workflow's run (an agent's too): its answer is its result, never an intermediate step's
    workflow: bool = False
    control_tools: frozenset[str] = frozenset()
    first_question: str | None = None  # of the first query or retrieval in the run
    turn: Turn = field(default_factory=Turn)
    # what may be a context, raw and in order: (NODES, [NodeWithScore], tool call) or
    # (TOOL_OUTPUT, ToolOutput, tool call); rendered to text only at the end
    found: list[tuple[str, Any, str | None]] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)  # tool call (span id) -> tool name
    # model calls waiting for their end event: event span id -> (call, the LLM span it runs in)
    pending: dict[str, tuple[ModelCall, str]] = field(default_factory=dict)
    busy_llms: set[str] = field(default_factory=set)
    answer_from_events: str | None = None
    answer_question: str | None = None  # the query the event's answer was given to
    answer_rank: int = 0
    open_children: set[str] = field(default_factory=set)
    # a chat stream whose writer (LlamaIndex's write_response_to_history) the run waits for
    awaited_writer: Any = None
    answer_call_unseen: bool = False
    closed: bool = False  # concluded, failed or evicted: no longer tracked
    session_id: str | None = None  # the conversation: the memory's own id, else groundtrace.session(...)'s
    # each agent tool call's id (the one the model's messages carry) and its ToolOutput, in order
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    # the variables of the prompt templates the run's model calls were filled from (LLM.predict's template and
    # its arguments): references, read at the end when no retrieval or tool output ran (capture.carried)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    model_root: bool = False  # the root is an LLM's own call (complete, chat): a model called by hand
    component_root: bool = False  # the root is an embedding model's or a retriever's own call: never a turn
    tracers_unread: bool = True  # whether a tracer's span of the root is still to be looked for (tracer_spans)
    unreadable: str | None = None  # why one of its spans or events could not be read (the first cause): no Record

    @classmethod
    def start(cls, span_id: str, arguments: dict[str, Any], tags: dict[str, Any] | None,
              instance: Any = None, workflow: bool | None = None) -> RootRun:
        """``workflow``: whether ``instance`` is a Workflow, if the caller knows already."""
        excluded = is_excluded(tags)
        workflow = isinstance(instance, Workflow) if workflow is None else workflow
        start_event = arguments.get("start_event") if workflow else None
        question = start_event_question(start_event) if workflow else input_text(arguments)
        return cls(
            span_id=span_id,
            started_ns=time.time_ns(),
            excluded=excluded,
            # an excluded call gets no trace ids: nothing will be attached to its trace
            trace_ids=None if excluded else otel_ids(),
            trace_links={} if excluded else current_links(),
            question=question,
            workflow=workflow,
            control_tools=frozenset({HANDOFF_TOOL}) if workflow and isinstance(instance, AgentWorkflow) else frozenset(),
            turn=Turn(question=question),
            session_id=root_session_id(arguments, instance, start_event) or current_session(),
        )

    @property
    def name(self) -> str:
        return span_name(self.span_id)

    def read_tracers(self) -> None:
        """A tracer's span of this root (OpenInference's) wins over what was current when it started: it is the
        request's own trace, and the span Phoenix shows the request as."""
        self.tracers_unread = False
        if not self.excluded and (found := tracer_span_ids(self.span_id)) is not None:
            self.trace_ids = found

    # ------------------------------------------------------------------------- from events
    def note_question(self, text: str | None) -> None:
        """A query or retrieval's input: derived from the question (or, in a hand-written root
        that names none, standing for it)."""
        if text is not None and self.first_question is None:
            self.first_question = text
        self.turn.note_query(text)

    def note_nodes(self, nodes: Any, within: str | None) -> None:
        if isinstance(nodes, list) and nodes:  # the list as it is now: an application may reuse its own
            self.found.append((NODES, list(nodes), within))

    def note_marked(self, retrieved: Retrieved, within: str | None) -> None:
        """A @groundtrace.retrieval call made inside this run: a retrieval of it (its query noted)."""
        self.found.append((MARKED, retrieved, within))
        self.note_question(retrieved.query)

    def note_prompt(self, template: Any, arguments: Any) -> None:
        """A model call filled a prompt template (LLM.predict): its variables, partial ones included."""
        partial = getattr(template, "kwargs", None)
        variables = {**(partial if isinstance(partial, dict) else {}), **(arguments if isinstance(arguments, dict) else {})}
        if variables and len(self.prompts) < MAX_PROMPTS:
            self.prompts.append(variables)

    def note_tool_call(self, call_id: str, name: str | None, arguments: dict[str, Any]) -> None:
        if name is not None:
            self.tool_names[call_id] = name
        if name not in self.control_tools:
            self.turn.note_query(tool_query(arguments))

    def note_tool_output(self, call_id: str, output: Any) -> None:
        """A tool call's output, a failed one's too (``is_error``: it becomes an error passage)."""
        if getattr(output, "tool_name", None) not in self.control_tools:
            self.found.append((TOOL_OUTPUT, output, call_id))

    def note_tool_result(self, result: Any) -> None:
        """An agent's tool call result (ToolCallResult): the call's id as the model knows it, and
        its output. A tool that raised left no output of its own (its span was dropped): the error
        output the agent made in its place, which its model reads, is an error passage."""
        output, call_id = result.tool_output, result.tool_id
        if result.tool_name in self.control_tools or not isinstance(call_id, str):
            return
        self.tool_calls.append((call_id, output))
        if getattr(output, "is_error", False) is True and all(value is not output for _, value, _ in self.found):
            self.tool_names[call_id] = result.tool_name
            self.found.append((TOOL_OUTPUT, output, call_id))

    def remember_tool_calls(self, earlier: EarlierCalls) -> None:
        """At the run's end: its agent tool calls, for the later turns that read them from memory."""
        for call_id, output in self.tool_calls:
            text = tool_output_text(output)
            if text:
                earlier.remember(call_id, text, self.span_id, getattr(output, "is_error", False) is True)

    def start_call(self, event_span: str, llm_span: str, model_input: Any) -> bool:
        """A model call began; False for a nested wrapper of a call already begun (``achat`` ->
        ``chat`` both send start events) in the same LLM span."""
        if llm_span in self.busy_llms:
            return False
        self.busy_llms.add(llm_span)
        self.pending[event_span] = (self.turn.start_call(model_input), llm_span)
        return True

    def end_call(self, event_span: str, response: Any) -> bool:
        entry = self.pending.pop(event_span, None)
        if entry is None:
            return False
        call, llm_span = entry
        call.output = response
        self.busy_llms.discard(llm_span)
        return True

    def note_streamed_answer(self, text: str) -> None:
        """A stream read after the root ended: its model call's end event came too late to be
        read (the run was closed), so the call still waiting is given the text it streamed."""
        for call in reversed(self.turn.calls):
            if call.output is None:
                call.output = text
                return
        # the stream's model call ran after the root (an async stream starts it only when read):
        # none of the run's calls wrote this answer
        self.answer_call_unseen = True

    def note_answer(self, text: str | None, rank: int, question: str | None = None) -> None:
        if text is not None and rank >= self.answer_rank:
            self.answer_from_events, self.answer_question, self.answer_rank = text, question, rank

    # ---------------------------------------------------------------------------- the end
    def is_turn(self) -> bool:
        """Index building, bare embedding or LLM calls are roots too, but no one's turn: a turn has
        a question or something retrieved."""
        return bool(self.question or self.first_question or self.found)

    def carries(self, question: str | None) -> bool:
        """Whether a prompt's variables may hold contexts (named like them, or by elimination): a cheap test
        of names and lengths, on the application's thread."""
        return any(prompt_variables(variables, question) for variables in self.prompts)

    def read_end(self, answer: str | None, result: Any, tools: ToolFilter = EVERY_TOOL, span_text: bool = True,
                 on_failure: Callable[[], None] | None = None,
                 earlier: EarlierCalls | None = None) -> PendingRecord | Record | str:
        """What this run's end makes, read on the application's thread: a :class:`TurnEnd` (the
        Record to be, which the Monitor's worker builds if it keeps it) when a retrieval or a tool's
        output makes this a turn for sure; else the Record built here; or why there is none.
        ``result``: what the root returned (its source nodes are what a synthesizer read).
        ``span_text=False``: a request span written here carries no question or answer (a mask or
        GROUNDTRACE_CAPTURE_TEXT=false is in force). ``on_failure`` is called when building fails
        in the worker (a failure of groundtrace's own, counted by the tracker). ``earlier``: the tool
        calls of the turns that ended before (contexts.choose_contexts)."""
        paired = None
        if answer is None and not self.workflow:  # the root returned no answer: take the best one
            answer, paired = self.answer_from_events, self.answer_question  # an event had, with its question
        question = self.question or paired
        if question is None:
            question = self._first_user_message() if self.workflow else self.first_question
        if question is None:
            return NO_QUESTION
        if answer is None:
            return NO_ANSWER
        ended = TurnEnd(self, question, answer, source_nodes(result), tools, on_failure, earlier)
        chosen = None
        if not ended.certain() and not self.carries(question):  # nothing retrieved or returned yet in sight: choose here, maybe nothing
            chosen = choose_contexts(self, answer, ended.response_nodes, tools, earlier, question)
            if chosen is None:
                return NOTHING_TO_SCORE
        # a request span is written (with the request's own times) only for a turn that makes a Record
        ended.seal(span_text)
        return ended if chosen is None else ended.record(chosen)

    def _first_user_message(self) -> str | None:
        """A workflow resumed without a StartEvent: the user's message its first model call read."""
        return last_user_message(self.turn.calls[0].input) if self.turn.calls else None


def request_span(root_name: str, question: str | None, answer: str | None, start_ns: int,
                 end_ns: int) -> tuple[str, str] | None:
    """Record a finished ``invoke_workflow {root}`` span, the root of a trace of its own, with the
    request's own start and end times; its ids, or None without a real TracerProvider.

    It is written once the request has ended: a request that fails or is never read to the end
    leaves no empty span behind."""
    attributes = {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer}
    span = start_request_span(TRACER_NAME, {k: v for k, v in attributes.items() if v is not None},
                              workflow=root_name, start_time=start_ns, new_trace=True)
    if span is None:
        return None
    end_request_span(span, end_time=end_ns)
    return otel_ids(span)


class TurnEnd(PendingRecord):
    """A root that ended, read as far as the application's thread needs to (:meth:`RootRun.read_end`):
    its question and answer, the response's nodes, the trace ids and links (the context's). The
    contexts are chosen, and the Record validated, by :meth:`build` in the Monitor's worker."""

    __slots__ = ("run", "question", "answer", "response_nodes", "tools", "links", "span_id", "on_failure", "earlier")

    def __init__(self, run: RootRun, question: str, answer: str, response_nodes: list[Any], tools: ToolFilter,
                 on_failure: Callable[[], None] | None, earlier: EarlierCalls | None = None) -> None:
        self.id, self.run_id, self.trace_id, self.metadata = run.span_id, None, None, EXCLUDED if run.excluded else NOT_EXCLUDED
        self.run, self.question, self.answer, self.response_nodes, self.tools = run, question, answer, response_nodes, tools
        self.on_failure, self.earlier = on_failure, earlier
        self.links: dict[str, str] = {}
        self.span_id: str | None = None

    def certain(self) -> bool:
        """Will the run's candidates hold a passage (:func:`contexts.choose_contexts` never finds none)?
        True when a node or a tool's text was seen; False leaves the answer to choose_contexts."""
        if any(isinstance(node, NodeWithScore) for node in self.response_nodes):
            return True
        for kind, value, _ in self.run.found:
            if kind == MARKED:
                return True  # the application said these are contexts
            if kind == NODES:
                if any(isinstance(node, NodeWithScore) for node in value):
                    return True
            elif getattr(value, "is_error", False) is not True and tool_output_text(value):
                return True  # a failed call's text is never a context
        return False

    def size_hint(self) -> int:
        """The answer and the text of the nodes the run saw (lengths only; a node's text is not rendered)."""
        size = len(self.answer)
        for kind, value, _ in list(self.run.found):
            if kind == NODES:
                size += sum(len(getattr(getattr(item, "node", None), "text", "") or "") for item in value)
        return size

    def seal(self, span_text: bool) -> None:
        """The ids that name the trace, read (or written: a request span) now, in the request's context."""
        run = self.run
        if run.tracers_unread:  # a root with no child
            run.read_tracers()
        trace_ids = run.trace_ids
        if trace_ids is None and not run.excluded:
            shown: tuple[str | None, str | None] = (self.question, self.answer) if span_text else (None, None)
            trace_ids = request_span(run.name, shown[0], shown[1], run.started_ns, time.time_ns())
        self.trace_id, self.span_id = trace_ids if trace_ids is not None else (None, None)
        # a tracer whose handler runs after ours (MLflow autolog) has opened its trace only by now;
        # what was current at the start wins
        self.links = {} if run.excluded else {**current_links(), **run.trace_links}

    def build(self) -> Record:
        """The Record, in the Monitor's worker."""
        try:
            chosen = choose_contexts(self.run, self.answer, self.response_nodes, self.tools, self.earlier, self.question)
            if chosen is None:  # certain() said there would be a passage
                raise ValueError("no passage after all")
            return self.record(chosen)
        except Exception as error:
            kind = type(error).__name__
            # said without the exception's message: it may quote the request's text, which no mask has seen yet
            if kind in _reported:  # loudly once per kind of failure, then quietly
                log.debug("groundtrace: building the record of %s failed: %s", self.run.name, failure_text(error))
            else:
                _reported.add(kind)
                log.warning("groundtrace: building the record of %s failed: %s", self.run.name, failure_text(error))
            if self.on_failure is not None:
                self.on_failure()
            raise

    def record(self, chosen: tuple[list[str], dict[str, Any]]) -> Record:
        run = self.run
        contexts, metadata = chosen
        if run.excluded:
            metadata["groundtrace_exclude"] = True
        call = run.turn.answer_call(self.answer, llm_output_text)
        if call is not None and (reply_id := response_id(call.output)) is not None:
            metadata["response_id"] = reply_id  # the provider's id of the evaluated reply (gen_ai.response.id)
        question, answer, contexts, cut = bounded(self.question, self.answer, contexts, metadata.pop(CHARS, None))
        if cut is not None:  # what was cut to the bounds a Record keeps, said on it
            metadata["truncated"] = cut
            metadata["nodes"] = metadata.get("nodes", [])[:len(contexts)]
        return Record(
            id=run.span_id,
            question=question,
            queries=[query for query in run.turn.queries if query != self.question] or None,
            contexts=contexts,
            answer=answer,
            metadata=metadata,
            trace_id=self.trace_id,
            span_id=self.span_id,
            trace_links=self.links,
            session_id=run.session_id,
        )
