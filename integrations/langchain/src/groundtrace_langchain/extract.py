"""Pure functions that read a question, an answer and documents out of LangChain's run data.

They run once per root run, at its end, so they may be thorough; they never raise on odd shapes
and return None when nothing fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langchain_core.prompt_values import PromptValue

QUESTION_KEYS = ("question", "input", "query")
ANSWER_KEYS = ("answer", "output", "result", "text")
# Keys under which an application may carry its own contexts when no retriever ran.
CONTEXT_KEYS = ("documents", "contexts", "context")
_HUMAN_ROLES = {"human", "user"}
_MAX_METADATA_TEXT = 300


def message_text(message: BaseMessage) -> str:
    """The text of a message whose content is a string or a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def _human_text(item: Any) -> str | None:
    """The text of a human message in any of the shapes LangChain accepts as one."""
    if isinstance(item, HumanMessage):
        return message_text(item)
    if isinstance(item, tuple) and len(item) == 2 and item[0] in _HUMAN_ROLES and isinstance(item[1], str):
        return item[1]
    if isinstance(item, Mapping) and item.get("role") in _HUMAN_ROLES and isinstance(item.get("content"), str):
        return item["content"]
    return None


def _last_human_text(messages: Iterable[Any]) -> str | None:
    texts = [text for text in map(_human_text, messages) if text is not None]
    return texts[-1] if texts else None


def question_from_input(value: Any) -> str | None:
    """The user's question in a root run's input: a string, a dict's question/input/query key,
    or the last human message (of a message list, a prompt value or a dict's 'messages')."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return message_text(value)
    if isinstance(value, PromptValue):
        return _last_human_text(value.to_messages())
    if isinstance(value, Mapping):
        for key in QUESTION_KEYS:
            if key in value:
                found = question_from_input(value[key])
                if found:
                    return found
        messages = value.get("messages")
        return _last_human_text(messages) if isinstance(messages, Sequence) else None
    if isinstance(value, Sequence):
        return _last_human_text(value)
    return None


def _text_value(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return message_text(value)
    return None


def answer_from_output(value: Any, answer_key: str | None = None) -> str | None:
    """The answer in a root run's output: a string, a message, or a dict's ``answer_key`` (by
    default the first of answer/output/result/text, then the last AI message in 'messages')."""
    direct = _text_value(value)
    if direct is not None:
        return direct
    if not isinstance(value, Mapping):
        return None
    if answer_key is not None:
        return _text_value(value.get(answer_key))
    for key in ANSWER_KEYS:
        found = _text_value(value.get(key))
        if found is not None:
            return found
    messages = value.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return message_text(message)
    return None


def generation_text(response: LLMResult | None) -> str | None:
    """The text of the first generation of an LLM call (a chat generation's text is its content)."""
    if response is None or not response.generations or not response.generations[0]:
        return None
    return response.generations[0][0].text


def source_id(document: Document) -> str | None:
    """What names a document's origin: its id, else its metadata's 'source'."""
    source = document.id or document.metadata.get("source")
    return None if source is None else str(source)


def unique_documents(batches: Iterable[Sequence[Document] | None]) -> list[Document]:
    """Documents of every retrieval in order, each (text, source id) kept once: two retrievers
    (or one called twice) often return the same passage, and it must not count twice."""
    seen: set[tuple[str, str | None]] = set()
    documents = []
    for batch in batches:
        for document in batch or ():
            key = (document.page_content, source_id(document))
            if key not in seen:
                seen.add(key)
                documents.append(document)
    return documents


def scalar_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-safe scalar entries of a metadata dict: sinks serialize records, and a vector or
    a client object in metadata must not break them (nor bloat every trace). Long texts are cut."""
    kept: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, str):
            kept[str(key)] = value[:_MAX_METADATA_TEXT]
        elif value is None or isinstance(value, (int, float, bool)):
            kept[str(key)] = value
    return kept


def document_summary(document: Document) -> dict[str, Any]:
    return {
        "id": document.id,
        "source": document.metadata.get("source"),
        "metadata": scalar_metadata(document.metadata),
    }


def contexts_from_values(*values: Any) -> list[Document | str] | None:
    """Contexts an application carried itself (a dict's documents/contexts/context key holding
    Documents or strings), for chains whose retrieval is not a LangChain retriever."""
    for value in values:
        if not isinstance(value, Mapping):
            continue
        for key in CONTEXT_KEYS:
            items = value.get(key)
            if isinstance(items, Sequence) and not isinstance(items, str) and items \
                    and all(isinstance(item, (Document, str)) for item in items):
                return list(items)
    return None
