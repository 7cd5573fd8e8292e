"""RootRun: what one root span has shown so far, and the Record it becomes when it ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from groundtrace.capture import end_request_span, start_request_span
from groundtrace.record import Record
from groundtrace.trace_context import current_links, otel_ids

from groundtrace_llamaindex.exclusion import is_excluded
from groundtrace_llamaindex.extract import NodeEntry, input_text, node_entries

# How much an event's answer is trusted when the root's own result carries none: the outermost
# query's end is the final answer; a synthesis or a bare LLM call may be an intermediate step.
QUERY_END, SYNTHESIZE_END, LLM_END = 3, 2, 1
TRACER_NAME = "groundtrace_llamaindex"
# Span ids are "Class.method-<uuid4>"; the uuid with its dash is 37 characters.
_UUID_SUFFIX = 37


def span_name(span_id: str) -> str:
    return span_id[:-_UUID_SUFFIX] if len(span_id) > _UUID_SUFFIX else span_id


def first_by_id(entries: list[NodeEntry]) -> list[NodeEntry]:
    """One entry per node id, where it first appeared (a node retrieved twice is one context)."""
    unique: dict[str, NodeEntry] = {}
    for entry in entries:
        unique.setdefault(entry.id, entry)
    return list(unique.values())


@dataclass(eq=False)
class RootRun:
    span_id: str
    started_ns: int
    excluded: bool
    trace_ids: tuple[str, str] | None
    trace_links: dict[str, str]
    question: str | None = None  # the root call's own input (a chat message, a query)
    first_question: str | None = None  # of the first query or retrieval in the run
    retrieved: list[Any] = field(default_factory=list)  # NodeWithScore, in retrieval order; read at the end
    answer_from_events: str | None = None
    answer_question: str | None = None  # the query the event's answer was given to
    answer_rank: int = 0
    open_children: set[str] = field(default_factory=set)
    # a chat stream whose writer (LlamaIndex's write_response_to_history) the run waits for
    awaited_writer: Any = None

    @classmethod
    def start(cls, span_id: str, arguments: dict[str, Any], tags: dict[str, Any] | None) -> RootRun:
        excluded = is_excluded(tags)
        return cls(
            span_id=span_id,
            started_ns=time.time_ns(),
            excluded=excluded,
            # an excluded call gets no trace ids: nothing will be attached to its trace
            trace_ids=None if excluded else otel_ids(),
            trace_links={} if excluded else current_links(),
            question=input_text(arguments),
        )

    @property
    def name(self) -> str:
        return span_name(self.span_id)

    # ------------------------------------------------------------------------- from events
    def note_question(self, text: str | None) -> None:
        if text is not None and self.first_question is None:
            self.first_question = text

    def note_nodes(self, nodes: Any) -> None:
        if isinstance(nodes, list):
            self.retrieved.extend(nodes)

    def note_answer(self, text: str | None, rank: int, question: str | None = None) -> None:
        if text is not None and rank >= self.answer_rank:
            self.answer_from_events, self.answer_question, self.answer_rank = text, question, rank

    # ---------------------------------------------------------------------------- the end
    def to_record(self, answer: str | None, response_nodes: list[Any], span_text: bool = True) -> Record | None:
        """The Record of this run, or None when it has no question or no answer to score.
        ``span_text=False``: a request span written here carries no question or answer (a mask or
        GROUNDTRACE_CAPTURE_TEXT=false is in force)."""
        if answer is None:  # the root's result is no answer: take the best one an event carried,
            answer, paired = self.answer_from_events, self.answer_question  # with its own question
        else:
            paired = None
        question = self.question or paired or self.first_question
        if question is None or answer is None:
            return None
        # the nodes the response names are what the answer was written from (a reranker or a
        # similarity cutoff may have dropped some retrieved ones); else all that was retrieved
        entries = first_by_id(node_entries(response_nodes or self.retrieved))
        trace_ids = self.trace_ids
        if trace_ids is None and not self.excluded:
            shown: tuple[str | None, str | None] = (question, answer) if span_text else (None, None)
            trace_ids = request_span(self.name, shown[0], shown[1], self.started_ns, time.time_ns())
        metadata: dict[str, Any] = {"nodes": [entry.summary() for entry in entries]}
        if self.excluded:
            metadata["groundtrace_exclude"] = True
        return Record(
            id=self.span_id,
            question=question,
            contexts=[entry.text for entry in entries],
            answer=answer,
            metadata=metadata,
            trace_id=trace_ids[0] if trace_ids else None,
            span_id=trace_ids[1] if trace_ids else None,
            # a tracer whose handler runs after ours (MLflow autolog) has opened its trace only by now;
            # what was current at the start wins
            trace_links={} if self.excluded else {**current_links(), **self.trace_links},
        )


def request_span(root_name: str, question: str | None, answer: str | None, start_ns: int,
                 end_ns: int) -> tuple[str, str] | None:
    """Record a finished ``groundtrace.request`` span, the root of a trace of its own, with the
    request's own start and end times; its ids, or None without a real TracerProvider.

    It is written once the request has ended: a request that fails or is never read to the end
    leaves no empty span behind."""
    attributes = {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer,
                  "groundtrace.llamaindex.root": root_name}
    span = start_request_span(TRACER_NAME, {k: v for k, v in attributes.items() if v is not None},
                              start_time=start_ns, new_trace=True)
    if span is None:
        return None
    end_request_span(span, end_time=end_ns)
    return otel_ids(span)
