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

The integrations feed a :class:`Turn` from their framework's events and call :meth:`Turn.contexts`
at the end; :func:`appears_in` is the single rule for "reached the model's input".
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundtrace.redaction import get_logger

log = get_logger("groundtrace.capture")

DOCUMENT, TOOL = "document", "tool"
# A long agent loop keeps only its last model calls: the answer's call is among the last ones.
MAX_MODEL_CALLS = 64
# Pieces shorter than this are too common ("Yes.", "1.") to prove a passage reached a prompt.
_MIN_PIECE = 24
# A passage whose own text is not in the prompt verbatim (a template cut or re-wrapped it) still
# counts when most of its sentences are there.
_MIN_PIECE_SHARE = 0.6
_PIECES = re.compile(r"(?<=[.!?。！？;；])\s+|\n+")


@dataclass(eq=False, slots=True)
class Passage:
    """A document, node or tool output seen during a turn, a candidate context."""

    text: str
    kind: str = DOCUMENT  # DOCUMENT (a retriever's document, a node) or TOOL (a tool's output)
    name: str | None = None  # the tool's name (TOOL), or the retriever's / source's
    id: str | None = None  # the document's / node's id, or the tool call's id
    # the tool call this document was retrieved inside, if any: the documents then stand for the
    # tool's output in the contexts (they carry ids and metadata; the tool's text is their join)
    within: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

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
class Selection:
    """A turn's passages split into what reached the answer's model call and what did not."""

    contexts: list[Passage]
    unused: list[Passage]
    # True when no model call was seen (the answer was assembled by code): every passage is kept,
    # as nothing says which ones the answer was written from
    unchecked: bool = False


def select_contexts(passages: Sequence[Passage], model_input: str | None,
                    tools: ToolFilter = ToolFilter()) -> Selection:
    """The contexts of a turn: the passages whose text reached ``model_input``, in the order they
    were seen, each text once; a tool output retrieved as documents is kept as those documents
    (which a ToolFilter then treats as that tool's output)."""
    haystack = None if model_input is None else normalize(model_input)
    # a document retrieved inside a tool call is that tool's output: it follows the tool's filter
    tool_of = {p.id: p.name for p in passages if p.kind == TOOL and p.id is not None}
    reached: list[Passage] = []
    unused: list[Passage] = []
    for passage in passages:
        if passage.kind == TOOL:
            allowed = tools.allows(passage.name)
        else:
            allowed = passage.within not in tool_of or tools.allows(tool_of[passage.within])
        if allowed and (haystack is None or appears_in(passage.text, haystack)):
            reached.append(passage)
        else:
            unused.append(passage)
    # a tool whose output is documents that reached the model is represented by those documents
    explained = {p.within for p in reached if p.kind == DOCUMENT and p.within is not None}
    contexts: list[Passage] = []
    seen: set[str] = set()
    for passage in reached:
        if passage.kind == TOOL and passage.id is not None and passage.id in explained:
            continue
        key = normalize(passage.text)
        if key and key not in seen:
            seen.add(key)
            contexts.append(passage)
    return Selection(contexts, unused, unchecked=haystack is None)


@dataclass(eq=False, slots=True)
class ModelCall:
    """One model call of a turn: its input and output as the framework gave them (rendered to text
    only at the turn's end, and only for the call that wrote the answer)."""

    input: Any
    output: Any = None


@dataclass(eq=False)
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

    def answer_call(self, answer: str | None, output_text: Callable[[Any], str | None]) -> ModelCall | None:
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

    def contexts(self, answer: str | None, input_text: Callable[[Any], str | None],
                 output_text: Callable[[Any], str | None], tools: ToolFilter = ToolFilter()) -> Selection:
        """The passages that reached the model call that wrote ``answer``. ``input_text`` and
        ``output_text`` render the framework's own call input and output as text."""
        call = self.answer_call(answer, output_text)
        model_input = input_text(call.input) if call is not None else None
        return select_contexts(self.passages, model_input, tools)


# ------------------------------------------------------------------------------ turns not recorded
class NoRecordReasons:
    """Why turns made no Record, counted per reason, and said once per reason at INFO level, so a
    user who wired the callback into an app it cannot read finds out without a log line per request."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def count(self, reason: str, hint: str = "") -> None:
        with self._lock:
            first = reason not in self._counts
            self._counts[reason] = self._counts.get(reason, 0) + 1
        if first:
            log.info("groundtrace: a %s turn made no record: %s%s (said once; counted in stats())",
                     self.framework, reason, f"; {hint}" if hint else "")

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
