"""A span's flat attributes, named by the OpenInference (else the GenAI) conventions, as a SpanView.

Both the OTLP files (``otel-json``) and Phoenix (which stores OpenInference attributes and returns
them flat: ``input.value``, ``retrieval.documents.0.document.content``) come through here, so the
two read a span the same way.

Read: ``openinference.span.kind``, ``input.value``, ``output.value``,
``retrieval.documents.N.document.content`` (``.id``, ``.score``), ``reranker.output_documents.N...``
for a RERANKER, ``metadata`` (JSON text, or flattened into ``metadata.KEY`` as Phoenix stores it),
``tag.tags``, ``session.id``, ``user.id``; where a span has no OpenInference kind, the GenAI
conventions (``gen_ai.operation.name``, ``gen_ai.input.messages``/``gen_ai.output.messages``, the
older ``gen_ai.prompt``/``gen_ai.completion``). groundtrace's own EVALUATOR spans
(``groundtrace.metric``) mark a trace as already scored.

A retriever's documents come from the ``retrieval.documents`` attributes only, never from its
``output.value``: LlamaIndex writes reprs there (``"<NodeWithScore(node=TextNode(id_=...))>"``),
which are not the texts the model saw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from groundtrace.sources.spans import Document, SpanView, decode

_DOC_ATTR = re.compile(r"^(retrieval\.documents|reranker\.output_documents)\.(\d+)\.document\.(content|id|score)$")
_GENAI_KINDS = {"chat": "LLM", "text_completion": "LLM", "generate_content": "LLM", "embeddings": "EMBEDDING",
                "execute_tool": "TOOL", "invoke_agent": "AGENT", "create_agent": "AGENT"}
_METADATA_PREFIX = "metadata."


def span_documents(attributes: Mapping[str, Any], prefix: str) -> list[Document]:
    """The documents under ``prefix`` (``retrieval.documents``), in index order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _DOC_ATTR.match(key)
        if match and match.group(1) == prefix:
            found.setdefault(int(match.group(2)), {})[match.group(3)] = value
    docs = []
    for _, fields in sorted(found.items()):
        content = fields.get("content")
        if isinstance(content, str) and content.strip():
            score = fields.get("score")
            if isinstance(score, str):  # some exporters write every attribute as text
                try:
                    score = float(score)
                except ValueError:
                    score = None
            docs.append(Document(content, None if fields.get("id") is None else str(fields["id"]),
                                 float(score) if isinstance(score, (int, float)) else None))
    return docs


def span_metadata(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The span's metadata (the ``metadata`` JSON, or Phoenix's ``metadata.KEY`` flattening of it;
    nested keys stay dotted), its tags under ``tags``, and the session and user ids."""
    metadata = decode(attributes.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    for key, value in attributes.items():
        if key.startswith(_METADATA_PREFIX):
            metadata.setdefault(key[len(_METADATA_PREFIX):], value)
    tags = decode(attributes.get("tag.tags"))
    if isinstance(tags, (list, tuple)) and tags:
        metadata["tags"] = [str(t) for t in tags]
    for key in ("session.id", "user.id"):
        if attributes.get(key) is not None:
            metadata[key] = attributes[key]
    return metadata


def openinference_kind(attributes: Mapping[str, Any]) -> str:
    """``openinference.span.kind`` in capitals, else the GenAI operation's kind, else UNKNOWN."""
    kind = attributes.get("openinference.span.kind")
    if kind:
        return str(kind).upper()
    return _GENAI_KINDS.get(str(attributes.get("gen_ai.operation.name")), "UNKNOWN")


def span_view(trace_id: str, span_id: str, parent_id: str | None, name: str, start: datetime | None,
              attributes: Mapping[str, Any]) -> SpanView:
    """A span's OpenInference (else GenAI) attributes as a SpanView."""
    kind = openinference_kind(attributes)
    docs = span_documents(attributes, "reranker.output_documents" if kind == "RERANKER" else "retrieval.documents")
    inputs = attributes.get("input.value", attributes.get("gen_ai.input.messages", attributes.get("gen_ai.prompt")))
    outputs = attributes.get("output.value", attributes.get("gen_ai.output.messages", attributes.get("gen_ai.completion")))
    evaluation = attributes.get("groundtrace.metric") if kind == "EVALUATOR" else None
    # the conversation: OpenInference's session.id, else the GenAI conventions' gen_ai.conversation.id
    session = attributes.get("session.id") or attributes.get("gen_ai.conversation.id")
    return SpanView(trace_id=trace_id, span_id=span_id, parent_id=parent_id, kind=kind, name=name, start_time=start,
                    input=inputs, output=outputs, documents=docs, metadata=span_metadata(attributes),
                    evaluation=str(evaluation) if evaluation else None, session_id=str(session) if session else None)


__all__ = ["openinference_kind", "span_documents", "span_metadata", "span_view"]
