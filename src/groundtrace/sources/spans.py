"""One request's spans, whatever platform logged them, turned into one Record.

Every source maps its platform's objects (OTLP spans, Phoenix spans, MLflow spans, LangSmith runs,
Langfuse observations) to :class:`SpanView`, then calls :func:`assemble` once per trace: this is
the one place that decides what a request's question, documents and answer are.

- the request is the trace's root span (the earliest one whose parent is not in the trace, not
  counting groundtrace's own EVALUATOR spans);
- the question is the root's input (a string, or a question/query/input key, or the last user
  message), else the query of its first retriever;
- the documents are those of the trace's retriever spans in start order, or of its last reranker
  when one ran (what the model was shown), repeated texts once;
- the answer is the root's output (a string, an answer/output/result key, or the last assistant
  message).

A trace with no documents or no answer is not a RAG request: :func:`assemble` returns the reason
instead of a Record, and nothing is guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from groundtrace.record import Record
from groundtrace.sources import SCORED_KEY, SOURCE_KEY

# query_bundle: LlamaIndex passes {"query_bundle": {"query_str": ...}} to _query and _retrieve
QUESTION_KEYS = ("question", "query", "query_str", "query_bundle", "input", "user_input", "prompt", "text", "content")
ANSWER_KEYS = ("answer", "output", "result", "response", "output_text", "text", "content", "generation")
DOCUMENT_LIST_KEYS = ("documents", "docs", "nodes", "source_nodes", "context", "contexts", "output")
_DOCUMENT_TEXT_KEYS = ("page_content", "content", "text", "document")
_USER_ROLES = {"user", "human", "humanmessage"}
_ASSISTANT_ROLES = {"assistant", "ai", "aimessage", "model"}

_JSON_LIST_START = re.compile(r'^\[\s*[\[{"\d-]')  # a list of lists, objects, strings or numbers

NO_RETRIEVAL = "no retrieval"
NO_ANSWER = "no answer"
ONLY_EVALUATIONS = "only evaluation spans"
FILTERED = "filtered out"


@dataclass
class Document:
    content: str
    id: str | None = None
    score: float | None = None


@dataclass
class SpanView:
    """A platform's span, run or observation, reduced to what :func:`assemble` reads.

    ``kind`` is an OpenInference span kind in capitals (CHAIN, RETRIEVER, RERANKER, LLM, AGENT,
    TOOL, EMBEDDING, EVALUATOR, UNKNOWN); ``input``/``output`` are the raw values (strings,
    JSON text or decoded JSON); ``evaluation`` names the groundtrace metric of an EVALUATOR span
    that groundtrace wrote (so a backfill knows the trace is already scored); ``session_id`` the
    conversation the platform filed the span or its trace under."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    kind: str = "UNKNOWN"
    name: str = ""
    start_time: datetime | None = None
    input: Any = None
    output: Any = None
    documents: list[Document] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    evaluation: str | None = None
    session_id: str | None = None


# ------------------------------------------------------------------------------ reading values
def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` where it is a mapping, else an empty one: a platform's field of any shape is read
    only where it has the shape the reader expects."""
    return value if isinstance(value, Mapping) else {}


def decode(value: Any) -> Any:
    """A JSON text decoded (objects and lists only); anything else as it is."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                return json.loads(stripped)
            except json.JSONDecodeError:
                return value
    return value


def _broken_json(text: str) -> bool:
    """A text that was meant as a JSON object or list but does not parse (cut by an attribute length
    limit, say): not a question or an answer. ``[urgent] why ...`` is still text."""
    stripped = text.strip()
    return stripped.startswith("{") or (stripped.startswith("[") and (
        stripped.endswith("]") or _JSON_LIST_START.match(stripped) is not None))


def _role(message: Mapping[str, Any]) -> str | None:
    """The role of a chat message in OpenAI, LangChain (plain or serialised) or Gemini shape."""
    for key in ("role", "type"):
        if isinstance(message.get(key), str) and message[key] != "constructor":
            return message[key].lower()
    ids = message.get("id")  # LangChain's serialised form: {"lc": 1, "id": [..., "HumanMessage"], "kwargs": {...}}
    if isinstance(ids, list) and ids and isinstance(ids[-1], str):
        return ids[-1].lower()
    return None


def _message_content(message: Mapping[str, Any]) -> str | None:
    for holder in (message, message.get("kwargs"), message.get("data"), message.get("message")):
        if not isinstance(holder, Mapping):
            continue
        content = holder.get("content")
        if content is None and isinstance(holder.get("parts"), list):  # GenAI: {"role", "parts": [{"type": "text", "content"}]}
            content = [part for part in holder["parts"] if isinstance(part, Mapping) and part.get("type", "text") == "text"]
            content = [{"text": part.get("content")} for part in content]
        if isinstance(content, str) and content.strip():
            return content
        if isinstance(content, list):  # content blocks
            parts = [b.get("text") if isinstance(b, Mapping) else b for b in content]
            text = "".join(p for p in parts if isinstance(p, str))
            if text.strip():
                return text
    return None


def _last_message(messages: Sequence[Any], roles: set[str]) -> str | None:
    flat: list[Any] = []
    for item in messages:  # LangChain batches: a list of message lists
        flat.extend(item if isinstance(item, list) else [item])
    for message in reversed(flat):
        if isinstance(message, Mapping) and (_role(message) or "") in roles:
            text = _message_content(message)
            if text:
                return text
    return None


def text_of(value: Any, keys: Sequence[str], roles: set[str]) -> str | None:
    """The text a request's input or output stands for, or None when nothing fits (no guessing
    among several unrelated strings)."""
    value = decode(value)
    if isinstance(value, str):
        return value if value.strip() and not _broken_json(value) else None
    if isinstance(value, Mapping):
        for key in keys:
            if key in value:
                found = text_of(value[key], keys, roles)
                if found:
                    return found
        if isinstance(value.get("messages"), list):
            return _last_message(value["messages"], roles)
        choices = value.get("choices")  # an OpenAI chat completion
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            return _message_content(choices[0]) or _message_content(choices[0].get("message") or {})
        if _role(value) in roles:
            return _message_content(value)
        strings = [v for v in value.values() if isinstance(v, str) and v.strip()]
        return strings[0] if len(strings) == 1 and len(value) == 1 else None
    if isinstance(value, list) and value:
        if all(isinstance(v, Mapping) for v in value):
            return _last_message(value, roles)
        if len(value) == 1:
            return text_of(value[0], keys, roles)
    return None


def question_of(value: Any) -> str | None:
    return text_of(value, QUESTION_KEYS, _USER_ROLES)


def answer_of(value: Any) -> str | None:
    return text_of(value, ANSWER_KEYS, _ASSISTANT_ROLES)


def _document(item: Any) -> Document | None:
    if isinstance(item, str):
        return Document(item) if item.strip() else None
    if not isinstance(item, Mapping):
        return None
    if item.get("lc") and isinstance(item.get("kwargs"), Mapping):  # LangChain's serialised form
        return _document(item["kwargs"])
    if isinstance(item.get("node"), Mapping):  # LlamaIndex NodeWithScore: {"node": {...}, "score": x}
        inner = _document(item["node"])
        if inner is not None and isinstance(item.get("score"), (int, float)):
            inner.score = float(item["score"])
        return inner
    for key in _DOCUMENT_TEXT_KEYS:
        value = item.get(key)
        if isinstance(value, Mapping):  # OpenInference: {"document": {"content": ..., "id": ...}}
            return _document(value)
        if isinstance(value, str) and value.strip():
            metadata = item.get("metadata")
            if not isinstance(metadata, Mapping):
                metadata = {}
            raw_id = item.get("id") or item.get("id_") or metadata.get("id")
            score = item.get("score")
            return Document(value, None if raw_id is None else str(raw_id),
                            float(score) if isinstance(score, (int, float)) else None)
    return None


def documents_of(value: Any) -> list[Document]:
    """Documents in a retriever's output: a list of documents (LangChain, LlamaIndex, OpenInference
    or plain strings), or a mapping that holds one under documents/nodes/source_nodes/..."""
    value = decode(value)
    if isinstance(value, Mapping):
        for key in DOCUMENT_LIST_KEYS:
            if isinstance(value.get(key), list):
                return documents_of(value[key])
        return []
    if isinstance(value, list):
        return [doc for doc in map(_document, value) if doc is not None]
    return []


# ------------------------------------------------------------------------------- assembling
def _start(span: SpanView) -> datetime:
    start = span.start_time or datetime.max.replace(tzinfo=timezone.utc)
    return start if start.tzinfo else start.replace(tzinfo=timezone.utc)


def trace_start(spans: Sequence[SpanView]) -> datetime:
    """When a trace started: its earliest span's start (naive times as UTC); the earliest possible
    time for a trace whose spans say nothing."""
    return min((_start(span) for span in spans if span.start_time is not None),
               default=datetime.min.replace(tzinfo=timezone.utc))


def _root(spans: Sequence[SpanView]) -> SpanView | None:
    ids = {span.span_id for span in spans}
    roots = [s for s in spans if (s.parent_id is None or s.parent_id not in ids) and s.kind != "EVALUATOR"]
    return min(roots, key=_start) if roots else None


def session_of(spans: Sequence[SpanView], root: SpanView) -> str | None:
    """The trace's conversation: the root's, else the first span's that names one (OpenInference sets
    session.id on every span under a session, GenAI's gen_ai.conversation.id may sit on the model call only)."""
    if root.session_id:
        return root.session_id
    return next((s.session_id for s in sorted(spans, key=_start) if s.session_id), None)


def contexts_of(spans: Sequence[SpanView]) -> list[str]:
    """The texts the answer was written from: the documents of the trace's retrievers in start order,
    or of its last reranker when one ran, each text once."""
    ordered = sorted(spans, key=_start)
    rerankers = [s for s in ordered if s.kind == "RERANKER" and s.documents]
    chosen = [rerankers[-1]] if rerankers else [s for s in ordered if s.kind == "RETRIEVER"]
    texts = (doc.content for span in chosen for doc in span.documents)
    return list(dict.fromkeys(text for text in texts if text.strip()))


def assemble(spans: Iterable[SpanView], source: str, **ids: Any) -> Record | str:
    """The Record of one trace's spans, or the reason it is not a RAG request.

    ``ids``: Record fields the source knows better than the spans (``run_id``, ``trace_links``,
    an ``id``); by default the record's id and trace_id are the trace id and its span_id the
    root's."""
    spans = list(spans)
    return _assemble(spans, _root(spans), source, ids)


def _assemble(spans: Sequence[SpanView], root: SpanView | None, source: str, ids: Mapping[str, Any]) -> Record | str:
    if root is None:
        return ONLY_EVALUATIONS
    contexts = contexts_of(spans)
    if not contexts:
        return NO_RETRIEVAL
    answer = answer_of(root.output)
    if answer is None:
        return NO_ANSWER
    retrievers = sorted((s for s in spans if s.kind == "RETRIEVER"), key=_start)
    question = question_of(root.input) or next(filter(None, (question_of(s.input) for s in retrievers)), None)
    scored = sorted({s.evaluation for s in spans if s.evaluation})
    metadata = {**root.metadata, SOURCE_KEY: source, "root_span": root.name}
    if root.start_time is not None:
        metadata["started"] = _start(root).isoformat()
    if scored:
        metadata[SCORED_KEY] = scored
    fields: dict[str, Any] = {"id": root.trace_id, "trace_id": root.trace_id, "span_id": root.span_id,
                              "question": question, "contexts": contexts, "answer": answer, "metadata": metadata,
                              "session_id": session_of(spans, root)}
    fields.update(ids)
    return Record.model_validate(fields)


def records_from_traces(
    traces: Iterable[Sequence[SpanView]], source: str, filters: Any, stats: Any,
    ids: Any = None,
) -> Iterator[Record]:
    """Records of the traces that pass ``filters`` (a SourceFilter: time window of the root's start,
    metadata/tags of the root, limit on records), counting each trace in ``stats`` (a SourceStats)
    as taken or skipped with its reason. ``ids(spans)``: extra Record fields for a trace."""
    if filters.limit is not None and filters.limit <= 0:
        return
    for spans in traces:
        root = _root(spans)  # found once: the filters and the assembler both read it
        started = None if root is None or root.start_time is None else _start(root)
        if root is not None and not (filters.admits_time(started)
                                     and filters.admits_metadata(root.metadata, root.metadata.get("tags"))):
            stats.skip(FILTERED)
            continue
        made = _assemble(spans, root, source, ids(spans) if ids else {})
        if isinstance(made, str):
            stats.skip(made)
            continue
        stats.took()
        yield made
        if filters.limit is not None and stats.records >= filters.limit:
            return  # now, not after reading one more trace from a paging platform


def group_by_trace(spans: Iterable[SpanView]) -> dict[str, list[SpanView]]:
    traces: dict[str, list[SpanView]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return traces


__all__ = ["ANSWER_KEYS", "Document", "NO_ANSWER", "NO_RETRIEVAL", "ONLY_EVALUATIONS", "QUESTION_KEYS", "SpanView",
           "answer_of", "as_mapping", "assemble", "contexts_of", "decode", "documents_of", "group_by_trace", "question_of",
           "records_from_traces", "session_of", "text_of", "trace_start"]
