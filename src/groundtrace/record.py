"""Record: one answer of a RAG application, with what it was grounded on.

Every field but the answer and the contexts is optional, and even those may be missing: a metric
that needs a missing field returns an error Score naming it, so one bad input never stops a batch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from groundtrace.errors import GroundtraceError

# C0/C1 control characters except tab, newline and carriage return: binary junk that would break
# tokenizers, terminals and HTML, and never carries meaning in an answer.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Lone surrogates (from broken decoding) cannot be encoded as UTF-8 and would crash any writer.
_SURROGATE = re.compile(r"[\ud800-\udfff]")

# Keys under which common frameworks keep a document's text.
_TEXT_KEYS = ("text", "page_content", "content")


def clean_text(text: str) -> str:
    """Drop control characters and lone surrogates; everything else is kept as is."""
    if _CONTROL.search(text) or _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))
    return text


def _context_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in _TEXT_KEYS:
            if isinstance(item.get(key), str):
                return item[key]
    for key in _TEXT_KEYS:  # a LangChain Document or a LlamaIndex node
        value = getattr(item, key, None)
        if isinstance(value, str):
            return value
    raise ValueError(f"a context must be a string or a document with a text field, got {type(item).__name__}")


class Record(BaseModel):
    """One question, the contexts retrieved for it, and the answer that was generated."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    id: str | None = None
    question: str | None = None
    # what the application derived from the question on the way (a condensed standalone question,
    # tool arguments, retriever queries), in order: see groundtrace.capture.turn
    queries: list[str] | None = None
    contexts: list[str] | None = None
    answer: str | None = None
    reference: str | None = None
    language: str | None = Field(default=None, description="ISO 639-1 code; guessed from the text when absent")
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Filled by the framework adapters so that sinks can attach scores to the right trace.
    trace_id: str | None = Field(default=None, description="OpenTelemetry trace id of the request, 32 hex digits")
    span_id: str | None = Field(default=None, description="OpenTelemetry span id of the request's root span, 16 hex digits")
    run_id: str | None = Field(default=None, description="LangChain root run id (= the LangSmith run id)")
    # The conversation this turn belongs to: OpenTelemetry GenAI's gen_ai.conversation.id, OpenInference's
    # session.id, Langfuse's sessionId (LangGraph's thread_id, a chat history's session, LlamaIndex's Memory)
    session_id: str | None = Field(default=None, description="the conversation (thread, session) of this turn")
    # Ids of the same request in systems with their own (MLflow trace id, Langfuse observation, ...).
    trace_links: dict[str, str] = Field(default_factory=dict)

    @field_validator("id", "session_id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        # Files often number their rows; an integer id is still an id.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("question", "answer", "reference", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        # before pydantic's own check, which refuses a str subclass holding a lone surrogate (a streamed answer
        # cut mid-character): repaired here, as in a plain str, never fatal
        return clean_text(str.__str__(value)) if isinstance(value, str) else value

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"queries must be a list of strings, got {type(value).__name__}")
        return [clean_text(item) for item in value]

    @field_validator("contexts", mode="before")
    @classmethod
    def _contexts(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):  # one context given as a bare string
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"contexts must be a list of strings, got {type(value).__name__}")
        texts = (_context_text(item) for item in value if item is not None)
        return [clean_text(text) for text in texts]

    @field_validator("language")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        return value.strip().lower().split("-")[0] or None if value else None

    def context_text(self) -> str:
        return "\n\n".join(self.contexts or [])


class InvalidRecord(GroundtraceError, ValueError):
    """Raised by :func:`coerce_record` with a message naming every bad field."""


class InvalidInput(BaseModel):
    """An input that could not even be read as a record (a line that is not JSON, say).

    It travels through the batch like a record, so that it ends as an error Score in the output
    instead of vanishing."""

    id: str | None = None
    message: str


def describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "record"
        parts.append(f"field '{field}': {item['msg']} (got {type(item.get('input')).__name__})")
    return "; ".join(parts)


def coerce_record(value: Any) -> Record:
    """A Record from a Record, a mapping, or anything with the same attributes."""
    if isinstance(value, Record):
        return value
    if isinstance(value, InvalidInput):
        raise InvalidRecord(value.message)
    if not isinstance(value, Mapping):
        raise InvalidRecord(f"a record must be a mapping or a groundtrace.Record, got {type(value).__name__}")
    try:
        return Record.model_validate(dict(value))
    except ValidationError as error:
        raise InvalidRecord(describe_validation_error(error)) from None


# a PendingRecord's metadata, read-only: all the Monitor reads of it before the Record is built
#: a Record's metadata key: why its retrieval gave no passage with text (what it returned), when it was not merely
#: empty: every metric that needs contexts then gives an error Score saying so, never a verdict from nothing
NO_TEXT = "contexts_unreadable"

NOT_EXCLUDED: Mapping[str, Any] = MappingProxyType({})
EXCLUDED: Mapping[str, Any] = MappingProxyType({"groundtrace_exclude": True})


class PendingRecord:
    """A Record captured on the application's thread and built later, off it.

    An integration hands the Monitor a subclass of this instead of a Record: what ``Monitor.submit``
    decides on (the ids its sampling hashes, the exclusion flag) is here at once; :meth:`build` makes
    the Record (choosing the contexts, validating every text), and the Monitor's worker calls it,
    through :func:`realize`, only for a record it keeps: one sampled out, excluded or dropped is never
    built. ``build`` may read only what no longer changes once the request has ended (the
    integration reads or copies the rest on the application's thread)."""

    __slots__ = ("id", "run_id", "trace_id", "metadata")

    def __init__(self, *, id: str | None = None, run_id: str | None = None, trace_id: str | None = None,
                 excluded: bool = False) -> None:
        self.id, self.run_id, self.trace_id = id, run_id, trace_id
        # read by Monitor.excludes, as a Record's metadata is: the run's own flag
        self.metadata = EXCLUDED if excluded else NOT_EXCLUDED

    def build(self) -> Record:
        raise NotImplementedError

    def size_hint(self) -> int:
        """About how many characters of text the Record will hold (the Monitor bounds its queue by them once it
        backs up): lengths only, never a rendering; 0 when unknown."""
        return 0


class Checked(PendingRecord):
    """A Record with the Scores a guard gave it on the request's path (Monitor.submit_scored): the workers deliver
    them instead of scoring it again."""

    __slots__ = ("record", "scores")

    def __init__(self, record: Record, scores: list[Any]) -> None:  # Scores (score.py imports this module)
        super().__init__(id=record.id, run_id=record.run_id, trace_id=record.trace_id)
        self.metadata = record.metadata  # Monitor.excludes reads the Record's own flag
        self.record, self.scores = record, scores

    def build(self) -> Record:
        return self.record

    def size_hint(self) -> int:
        record = self.record
        return len(record.question or "") + len(record.answer or "") + sum(map(len, record.contexts or ()))


def realize(record: Record | PendingRecord) -> Record | InvalidInput:
    """The Record to score: a Record as it is, a PendingRecord built now. A build that fails (a
    failure of groundtrace's own, logged and counted by the integration) becomes an InvalidInput,
    which every engine turns into error Scores: counted as failed, never lost."""
    if not isinstance(record, PendingRecord):
        return record
    try:
        return record.build()
    except Exception as error:
        return InvalidInput(id=record.id, message=f"groundtrace failed to build the record ({type(error).__name__})")


def salvage_id(value: Any) -> str | None:
    """The id of an input that failed validation, so its error Score can still be matched up."""
    raw = value.get("id") if isinstance(value, Mapping) else getattr(value, "id", None)
    return None if raw is None else str(raw)


def placeholder_record(value: Any) -> Record:
    """The Record written out for an input that failed validation: its id, and nothing invented."""
    return Record(id=salvage_id(value))


# How much text a captured Record may carry, cut where the Record is built.
#
# A retrieved context of 5 MB is a bug upstream, not a passage: the metrics refuse more than a million characters
# of contexts anyway, and scoring that much live would take the application's machine. Live capture cuts a
# Record to :data:`MAX_CONTEXT_CHARS` of contexts and :data:`MAX_ANSWER_CHARS` of answer where it is built,
# before any copy, validation, mask or pipe, so that a huge input costs the application's process a bounded
# amount of work and memory: the question and the answer
# are cut to their bounds, the contexts are kept in order until their total reaches its bound (the one that
# crosses it cut, the rest left out). What was cut is said on the Record, ``metadata["truncated"]``:
# ``{"answer": {"chars": 5000000, "kept": 20000}, "contexts": {"chars": ..., "kept": ..., "passages": 3,
# "kept_passages": 1}}``. Every bound is a slice or a length: O(1) per text, O(passages) in all.

#: the most of the answer, and of the question, a captured Record keeps (a fifth of the metrics' own limit)
MAX_ANSWER_CHARS = 20_000
MAX_QUESTION_CHARS = 20_000
#: the most of the contexts together a captured Record keeps (a fifth of the metrics' own limit: a context of
#: 200,000 characters is some 50 pages; scoring more, in the application's machine, would take its CPU)
MAX_CONTEXT_CHARS = 200_000
#: the most entries of one retrieval's result read where it is captured (a list's items, a frame's rows, a client's
#: hits, a pager's points): the rest is left unread, as text past MAX_CONTEXT_CHARS is, and the Record says so
MAX_PASSAGES = 1_000
#: the most of a model call's input read to choose the contexts (what reached it beyond that is not looked at)
MAX_INPUT_CHARS = MAX_CONTEXT_CHARS + MAX_ANSWER_CHARS


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (a slice: nothing is read)."""
    return text if len(text) <= limit else text[:limit]


CUT_FROM = "cut_from"  # a passage's metadata key: its length before it was cut where it was read


def bounded(question: str | None, answer: str | None, contexts: Sequence[str], chars: int | None = None
            ) -> tuple[str | None, str | None, list[str], dict[str, Any] | None]:
    """The question, answer and contexts within their bounds, and what was cut (None when nothing was).
    ``chars``: the contexts' length before an integration already cut a passage to the bound where it read it
    (they were longer than they are now)."""
    cut: dict[str, Any] = {}
    if question is not None and len(question) > MAX_QUESTION_CHARS:
        cut["question"] = {"chars": len(question), "kept": MAX_QUESTION_CHARS}
        question = question[:MAX_QUESTION_CHARS]
    if answer is not None and len(answer) > MAX_ANSWER_CHARS:
        cut["answer"] = {"chars": len(answer), "kept": MAX_ANSWER_CHARS}
        answer = answer[:MAX_ANSWER_CHARS]
    total = sum(map(len, contexts))
    kept = list(contexts)
    if chars is not None and chars > total:  # cut already where they were read: said as such
        cut["contexts"] = {"chars": chars, "kept": min(total, MAX_CONTEXT_CHARS), "passages": len(contexts),
                           "kept_passages": len(contexts)}
    if total > MAX_CONTEXT_CHARS:
        kept, room = [], MAX_CONTEXT_CHARS
        for text in contexts:
            if room <= 0:
                break
            kept.append(text[:room])
            room -= len(kept[-1])
        cut["contexts"] = {"chars": max(total, chars or 0), "kept": MAX_CONTEXT_CHARS, "passages": len(contexts),
                           "kept_passages": len(kept)}
    return question, answer, kept, cut or None


def oversized(record: Any) -> bool:
    """Whether a Record is over a bound (lengths only)."""
    return (len(record.question or "") > MAX_QUESTION_CHARS or len(record.answer or "") > MAX_ANSWER_CHARS
            or sum(map(len, record.contexts or ())) > MAX_CONTEXT_CHARS)


def bound_record(record: Any) -> Any:
    """A Record within the bounds: itself when it is, else a copy cut to them that says what was cut."""
    if not oversized(record):
        return record
    question, answer, contexts, cut = bounded(record.question, record.answer, record.contexts or [])
    metadata = {**record.metadata, "truncated": cut}
    return record.model_copy(update={"question": question, "answer": answer,
                                     "contexts": contexts if record.contexts is not None else None,
                                     "metadata": metadata})
