"""The one definition of a captured turn, written once here and honoured by every integration.

A **turn** is what one root run (LangChain, LangGraph) or root span (LlamaIndex) did to answer one
user message. However many model calls, tool calls, retrievals, streams or sub-graphs it took, it
makes at most one Record:

- ``question``: what the user asked in that turn: the last user message of the turn's input, or the
  query / ``user_msg`` given to the engine or agent. Never a query the application derived from it.
- ``queries``: the queries the application derived from the question on the way (a condensed
  standalone question, tool arguments, retriever queries), in the order they were made, each once.
- ``answer``: the text the user received: the final message, the workflow's result, a stream's text.
- ``contexts``: what the model call that wrote the answer actually read: every passage (document,
  node or tool output) seen in the turn whose text reached that call's input. Passages retrieved
  and then dropped (compression, rerank, postprocessors, a rejected retrieval) are not contexts;
  they are kept beside the Record as ``metadata["unused_contexts"]`` (names and ids, no text).
- a tool call that **failed** (the framework says so: an error event, an error status, ``is_error``) is
  never a context: its text is an error message (``Passage.error``; ``"reason": "tool error"`` in
  ``unused_contexts``; ``Selection.tool_errors()`` for ``metadata["tool_errors"]``).

**A passage written by a model call of the same turn stands for what that call read.** A
sub-agent's reply handed to a supervisor, a query engine tool's answer, any tool whose output is a
model's generation: the model call that wrote the answer read that text, and that text was written
from what the inner call read. So the calls the answer read are the answer's call plus every call
of the turn whose reply (24+ characters after whitespace folding: "yes" or a grade never counts)
appears whole in the input of a call already among them, recursively (:meth:`Turn.reading`); the
contexts are the passages that reached the input of any of them; and a passage that holds the reply
of one of those inner calls is set aside as ``"model-written"`` (a summary in ``unused_contexts``,
never a context) when that inner call read at least one passage, which then stands for it. An inner
call that read no passage (a tool that fetched its data by code, not by a retriever or tool the turn
saw, and wrote its result with a model) leaves its output a context: it is the nearest thing to the
source the turn saw. A tool called inside another tool is represented the same way by what was
retrieved or returned inside it (:attr:`Passage.within`). Handoff and routing messages are never
contexts: each integration leaves out its framework's own markers.

The integrations feed a :class:`Turn` from their framework's events and call :meth:`Turn.contexts`
(or :meth:`Turn.reading` and :func:`select_contexts` on passages of their own) once, at the turn's
end; :func:`appears_in` is the single rule for "reached the model's input". Where roots went is
counted in the one shape :class:`groundtrace.capture.stats.CaptureStats`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# where roots went is counted in groundtrace.capture.stats; the reasons' counter was first defined here
from groundtrace.capture.stats import NoRecordReasons as NoRecordReasons

DOCUMENT, TOOL = "document", "tool"
# Why a passage that reached the answer is not a context: a model of the turn wrote it (see above)
MODEL_WRITTEN = "model-written"
# Why a tool's output is never a context: the call failed, and its text is the error (an exception's message, a
# ToolMessage with status "error", an is_error tool output, a middleware's error message), not a source
TOOL_ERROR = "tool error"
# A long agent loop keeps only its last model calls: the answer's call is among the last ones.
MAX_MODEL_CALLS = 64
# Pieces shorter than this are too common ("Yes.", "1.") to prove a passage reached a prompt, or
# that a reply ("yes", a grade) was handed on to another call.
_MIN_PIECE = MIN_REPLY = 24
# A passage whose own text is not in the prompt verbatim (a template cut or re-wrapped it) still
# counts when most of its sentences are there.
_MIN_PIECE_SHARE = 0.6
_PIECES = re.compile(r"(?<=[.!?。！？;；])\s+|\n+")

Render = Callable[[Any], str | None]  # a framework object as text, or None


@dataclass(eq=False, slots=True)
class Passage:
    """A document, node or tool output seen during a turn, a candidate context."""

    text: str
    kind: str = DOCUMENT  # DOCUMENT (a retriever's document, a node) or TOOL (a tool's output)
    name: str | None = None  # the tool's name (TOOL), or the retriever's / source's
    id: str | None = None  # the document's / node's id, or the tool call's id
    # the tool call this passage was retrieved or returned inside, if any: what reached the model
    # from inside a tool call stands for that call's output, and for the calls it ran inside, in the
    # contexts (documents carry ids and metadata; the tool's text is their join)
    within: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # the tool call failed: its text is an error message, never a context (set by the integration from what the
    # framework says of the call: an error event, an error status, an is_error flag; never guessed from the text)
    error: bool = False

    def summary(self) -> dict[str, Any]:
        """What is kept of a passage beside the Record: where it came from, never its text."""
        found: dict[str, Any] = {"kind": self.kind}
        if self.name is not None:
            found["name"] = self.name
        if self.id is not None:
            found["id"] = self.id
        return found


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Which tools' outputs may be contexts: ``include`` (only these names) and ``exclude``."""

    include: frozenset[str] | None = None
    exclude: frozenset[str] = frozenset()

    @classmethod
    def of(cls, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> ToolFilter:
        return cls(None if include is None else frozenset(include), frozenset(exclude or ()))

    def allows(self, name: str | None) -> bool:
        if name is not None and name in self.exclude:
            return False
        return self.include is None or name in self.include


def normalize(text: str) -> str:
    """Whitespace folded to single spaces: templates re-wrap and indent what they insert.
    (str.split() splits on exactly the characters ``\\s`` matches, five times faster than re.sub.)"""
    return " ".join(text.split())


def appears_in(text: str, model_input: str) -> bool:
    """Did ``text`` reach a model whose input (already :func:`normalize` d) is ``model_input``?

    Yes when the text is there verbatim (after whitespace folding), or when at least 60% of its
    sentences of 24+ characters are (a template that cut, numbered or re-joined them)."""
    flat = normalize(text)
    if not flat:
        return False
    if flat in model_input:
        return True
    pieces = [p for p in (normalize(piece) for piece in _PIECES.split(text)) if len(p) >= _MIN_PIECE]
    if len(pieces) < 2:
        return False
    found = sum(1 for piece in pieces if piece in model_input)
    return found / len(pieces) >= _MIN_PIECE_SHARE


@dataclass(frozen=True, slots=True)
class ReadCall:
    """A model call whose reply the answer's call read (itself, or through another such call): its
    input and its reply, each as text with whitespace folded."""

    input: str
    reply: str


@dataclass(frozen=True, slots=True)
class Selection:
    """A turn's passages split into what reached the answer's model call and what did not."""

    contexts: list[Passage]
    unused: list[Passage]
    # True when no model call was seen (the answer was assembled by code): every passage is kept,
    # as nothing says which ones the answer was written from
    unchecked: bool = False
    # reached the answer, but a model of the turn wrote it from passages that stand for it
    written: list[Passage] = field(default_factory=list)
    # the outputs of tool calls that failed, whether or not their text reached a model: never contexts
    errors: list[Passage] = field(default_factory=list)

    def set_aside(self, more: Iterable[Passage] = ()) -> list[dict[str, Any]]:
        """Summaries (no text) of what is not a context, each once: what did not reach the answer,
        ``more`` of the integration's own, then what a model wrote (``"reason": "model-written"``), then the
        failed tool calls (``"reason": "tool error"``)."""
        summaries: list[dict[str, Any]] = []
        for passage in (*self.unused, *more):
            if (summary := passage.summary()) not in summaries:
                summaries.append(summary)
        for reason, passages in ((MODEL_WRITTEN, self.written), (TOOL_ERROR, self.errors)):
            for passage in passages:
                if (summary := {**passage.summary(), "reason": reason}) not in summaries:
                    summaries.append(summary)
        return summaries

    def tool_errors(self) -> dict[str, Any] | None:
        """How many tool calls of the turn failed and which tools, for ``metadata["tool_errors"]``; None when none
        did. A signal of its own: an agent whose tools fail answers from what it has, or from nothing."""
        if not self.errors:
            return None
        calls = {passage.id or id(passage): passage.name for passage in self.errors}
        return {"count": len(calls), "tools": sorted({name for name in calls.values() if name})}


def select_contexts(passages: Sequence[Passage], model_input: str | None,
                    tools: ToolFilter = ToolFilter(), read: Sequence[ReadCall] = ()) -> Selection:
    """The contexts of a turn: the passages whose text reached ``model_input`` (or the input of a
    call in ``read``: the calls whose replies the answer's call read), in the order they were seen,
    each text once. A passage that holds the reply of a call in ``read`` that read another passage
    is model-written: set aside. A tool call whose output is represented by passages retrieved or
    returned inside it that reached the model is kept as those passages (which a ToolFilter then
    treats as that tool's output)."""
    haystack = None if model_input is None else "\n".join([normalize(model_input), *(call.input for call in read)])
    # a document retrieved inside a tool call is that tool's output: it follows the tool's filter
    errors = [p for p in passages if p.error]
    passages = [p for p in passages if not p.error]
    tool_of = {p.id: p for p in passages if p.kind == TOOL and p.id is not None}
    reached: list[Passage] = []
    unused: list[Passage] = []
    for passage in passages:
        if passage.kind == TOOL:
            allowed = tools.allows(passage.name)
        else:
            allowed = passage.within not in tool_of or tools.allows(tool_of[passage.within].name)
        if allowed and (haystack is None or appears_in(passage.text, haystack)):
            reached.append(passage)
        else:
            unused.append(passage)
    written = _model_written(reached, read) if read else []
    written_ids = {id(p) for p in written}
    explained = _explained(reached, tool_of)
    contexts: list[Passage] = []
    seen: set[str] = set()
    for passage in reached:
        if id(passage) in written_ids or (passage.kind == TOOL and passage.id in explained):
            continue
        key = normalize(passage.text)
        if key and key not in seen:
            seen.add(key)
            contexts.append(passage)
    return Selection(contexts, unused, unchecked=haystack is None, written=written, errors=errors)


def _model_written(reached: list[Passage], read: Sequence[ReadCall]) -> list[Passage]:
    """The tool outputs that hold the reply of a call in ``read`` which read some other passage
    itself (and not this one: a call that quotes a tool's output did not write it); what that call
    read stands for the reply. A document is retrieved, never written by the turn's models, even
    when an answer quotes it word for word."""
    flat = [normalize(p.text) for p in reached]
    readers = [{i for i, passage in enumerate(reached) if appears_in(passage.text, call.input)} for call in read]
    return [passage for i, passage in enumerate(reached)
            if passage.kind == TOOL and any(call.reply in flat[i] and i not in readers[n] and readers[n]
                                            for n, call in enumerate(read))]


def _explained(reached: list[Passage], tool_of: dict[str, Passage]) -> set[str]:
    """The tool calls represented by what reached the model from inside them, and the calls those
    ran inside, up to the outermost."""
    explained: set[str] = set()
    for passage in reached:
        outer = passage.within
        while outer is not None and outer not in explained:
            explained.add(outer)
            tool = tool_of.get(outer)
            outer = tool.within if tool is not None else None
    return explained


@dataclass(eq=False, slots=True)
class ModelCall:
    """One model call of a turn: its input and output as the framework gave them (rendered to text
    only at the turn's end, and only for the calls the answer read)."""

    input: Any
    output: Any = None


@dataclass(frozen=True, slots=True)
class Reading:
    """What the answer's model call read: ``calls``, that call first, then every call of the turn
    whose reply it read (recursively); ``model_input``, the answer call's input as text; ``read``,
    the other calls' inputs and replies as text (for :func:`select_contexts`)."""

    calls: list[ModelCall]
    model_input: str | None
    read: list[ReadCall]


def reading(calls: Sequence[ModelCall], answer_call: ModelCall, input_text: Render, output_text: Render,
            replies_in: Callable[[Any], Iterable[str]] | None = None) -> Reading:
    """The calls ``answer_call`` read: itself, then each call whose reply (24+ characters, whitespace
    folded) appears whole in one of the texts ``replies_in`` lists of the input of a call already
    read, recursively. ``replies_in`` says where in an input a reply may have been handed over (the
    AI and tool messages, say); by default the whole input text."""
    replies: dict[int, tuple[ModelCall, str]] = {}
    for index, call in enumerate(calls):
        if call is answer_call or call.output is None:
            continue
        reply = output_text(call.output)
        flat = normalize(reply) if reply else ""
        if len(flat) >= MIN_REPLY:
            replies[index] = (call, flat)
    model_input = input_text(answer_call.input)
    found, read, queue = [answer_call], [], [answer_call]
    inputs = {id(answer_call): normalize(model_input or "")}  # each input rendered once

    def text_of(call: ModelCall) -> str:
        if id(call) not in inputs:
            inputs[id(call)] = normalize(input_text(call.input) or "")
        return inputs[id(call)]

    while queue and replies:
        reader = queue.pop(0)
        texts = [normalize(t) for t in replies_in(reader.input)] if replies_in is not None else [text_of(reader)]
        for index, (call, reply) in list(replies.items()):
            if any(reply in text for text in texts):
                del replies[index]
                found.append(call)
                queue.append(call)
                read.append(ReadCall(text_of(call), reply))
    return Reading(found, model_input, read)


@dataclass(eq=False, slots=True)
class Turn:
    """What one turn has shown so far; the integrations add to it as their events arrive."""

    question: str | None = None
    queries: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)

    def note_query(self, text: str | None) -> None:
        """A query derived from the question (it is kept once, and never as the question itself)."""
        if text and text.strip() and text != self.question and text not in self.queries:
            self.queries.append(text)

    def add_passage(self, passage: Passage) -> None:
        if passage.text and passage.text.strip():
            self.passages.append(passage)

    def start_call(self, model_input: Any) -> ModelCall:
        call = ModelCall(model_input)
        self.calls.append(call)
        if len(self.calls) > MAX_MODEL_CALLS:
            del self.calls[0]
        return call

    def answer_call(self, answer: str | None, output_text: Render) -> ModelCall | None:
        """The model call that wrote ``answer``: the last call whose output is the answer (or holds
        it, or is held by it: a parser or a stream may trim), else the last call with an output."""
        finished = [call for call in self.calls if call.output is not None]
        if not finished:
            return self.calls[-1] if self.calls else None
        if answer:
            wanted = normalize(answer)
            for call in reversed(finished):
                text = output_text(call.output)
                flat = normalize(text) if text else ""
                if flat and (flat == wanted or flat in wanted or wanted in flat):
                    return call
        return finished[-1]

    def reading(self, answer_call: ModelCall, input_text: Render, output_text: Render,
                replies_in: Callable[[Any], Iterable[str]] | None = None) -> Reading:
        """What ``answer_call`` read, among this turn's model calls (see :func:`reading`)."""
        return reading(self.calls, answer_call, input_text, output_text, replies_in)

    def contexts(self, answer: str | None, input_text: Render, output_text: Render,
                 tools: ToolFilter = ToolFilter(),
                 replies_in: Callable[[Any], Iterable[str]] | None = None) -> Selection:
        """The passages that reached the model call that wrote ``answer``, or a call whose reply it
        read. ``input_text`` and ``output_text`` render the framework's own call input and output
        as text; ``replies_in`` lists where an input may hold another call's reply."""
        call = self.answer_call(answer, output_text)
        if call is None:
            return select_contexts(self.passages, None, tools)
        read = self.reading(call, input_text, output_text, replies_in)
        return select_contexts(self.passages, read.model_input, tools, read.read)


def origin_of(contexts: Sequence[Passage], marked: Callable[[Passage], bool]) -> str | None:
    """``metadata["contexts_from"]`` for contexts chosen among a turn's retrievals and tool outputs: None (the
    key is left out) when none was ``marked`` (a @groundtrace.retrieval call's), since a framework's own
    retrievers and tools are where contexts come from unless said otherwise; else each origin once, in
    order: the marked function's (its passages' name), "retriever", "tool"."""
    if not any(marked(passage) for passage in contexts):
        return None
    kinds: list[str] = []
    for passage in contexts:
        kind = passage.name if marked(passage) and passage.name else "retriever" if passage.kind == DOCUMENT else "tool"
        if kind not in kinds:
            kinds.append(kind)
    return "; ".join(kinds)
