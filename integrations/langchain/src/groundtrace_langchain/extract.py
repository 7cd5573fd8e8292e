"""Pure functions that read a question, an answer and documents out of LangChain's run data.

They run once per root run, at its end, so they may be thorough; they never raise on odd shapes
and return None when nothing fits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from groundtrace.capture.carried import CARRIERS, scalar_metadata
from groundtrace.record import MAX_INPUT_CHARS, cap
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables.utils import AddableDict

QUESTION_KEYS = ("question", "input", "query")
ANSWER_KEYS = ("answer", "output", "result", "text")
# The argument of a tool call that is its query; without one, the arguments as JSON are.
TOOL_QUERY_KEYS = ("query", "question", "q")
# response_metadata keys of langgraph-supervisor's and langgraph-swarm's handoff messages
HANDOFF_KEYS = ("__handoff_destination", "__is_handoff_back")
# what langchain's ContextEditingMiddleware leaves of a tool result it cleared from a model's input
CLEARED = "[cleared]"
_HUMAN_ROLES = {"human", "user"}
# the output types that may hold contexts: a streamed RunnableParallel's output is an AddableDict
STEP_OUTPUTS = CARRIERS | {AddableDict}


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


def _last_human_text(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        text = _human_text(message)
        if text is not None:
            return text
    return None


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
        return _last_human_text(messages) if isinstance(messages, Sequence) and not isinstance(messages, str) else None
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
        if key in value:
            found = _text_value(value[key])
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


def response_id(response: LLMResult | None) -> str | None:
    """The id the model's provider gave this reply (OpenAI's "chatcmpl-..."), for ``gen_ai.response.id``:
    the message's response metadata, the call's llm_output, or the message id unless LangChain made it up
    (``run-...`` / ``lc_run--...``)."""
    if response is None or not response.generations or not response.generations[0]:
        return None
    message = getattr(response.generations[0][0], "message", None)
    metadata = getattr(message, "response_metadata", None) or {}
    found = metadata.get("id") or (response.llm_output or {}).get("id")
    if not found and isinstance(message, AIMessage) and message.id and not message.id.startswith(("run-", "lc_run-")):
        found = message.id
    return found if isinstance(found, str) and found else None


def requested_tool_calls(response: LLMResult | None) -> list[str]:
    """The ids of the tool calls a model call asked for (its first generation's message)."""
    if response is None or not response.generations or not response.generations[0]:
        return []
    message = getattr(response.generations[0][0], "message", None)
    return [str(c["id"]) for c in message.tool_calls if c.get("id")] if isinstance(message, AIMessage) else []


def _call_messages(call_input: Any) -> Iterator[Any]:
    """The messages (or prompt strings) of a model call's input: on_chat_model_start gives a list
    of message lists, on_llm_start a list of prompts."""
    if isinstance(call_input, str):
        yield call_input
        return
    if not isinstance(call_input, Sequence):
        return
    for item in call_input:
        if isinstance(item, (str, BaseMessage)):
            yield item
        elif isinstance(item, Sequence):
            yield from item


def call_input_text(call_input: Any) -> str | None:
    """A model call's input as one text: every message's text (all roles) or every prompt, joined; read up to
    MAX_INPUT_CHARS (a 5 MB prompt is not read whole to choose its contexts)."""
    parts, room = [], MAX_INPUT_CHARS
    for item in _call_messages(call_input):
        if room <= 0:
            break
        part = cap(item if isinstance(item, str) else message_text(item), room)
        parts.append(part)
        room -= len(part) + 1
    return "\n".join(parts) if parts else None


def is_routing(message: BaseMessage) -> bool:
    """A handoff's acknowledgement ("Successfully transferred to ..."): control flow, not content.
    langgraph-supervisor and langgraph-swarm mark them in response_metadata."""
    metadata = message.response_metadata  # (no generator: this runs for every tool output and message read)
    return bool(metadata) and (HANDOFF_KEYS[0] in metadata or HANDOFF_KEYS[1] in metadata)


def tool_messages(call_input: Any) -> list[ToolMessage]:
    """The tool results a model call read: the ToolMessages of its input (handoffs and results
    cleared by context editing left out)."""
    return [item for item in _call_messages(call_input)
            if isinstance(item, ToolMessage) and not is_routing(item) and item.content != CLEARED]


def replies_read(call_input: Any) -> list[str]:
    """The texts of the AI and tool messages a model call read: where another model call's reply
    (a sub-agent's answer, handed over as a message or as a tool's result) shows up whole."""
    return [message_text(item) for item in _call_messages(call_input)
            if isinstance(item, (AIMessage, ToolMessage)) and not is_routing(item)]


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def tool_output_text(output: Any) -> str | None:
    """A tool's output as the text the model reads: a ToolMessage's content, a string, structured
    output as JSON, a LangGraph Command's tool messages. None when there is no text."""
    if output is None:
        return None
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return None if is_routing(output) else message_text(output)
    if isinstance(output, Document):
        return output.page_content
    update = getattr(output, "update", None)  # a LangGraph Command (not imported: langgraph is optional)
    if type(output).__name__ == "Command":
        if getattr(output, "goto", None) or not isinstance(update, Mapping):  # a handoff: routing, not content
            return None
        messages = update.get("messages")
        texts = [message_text(m) for m in messages if isinstance(m, ToolMessage) and not is_routing(m)] \
            if isinstance(messages, Sequence) else []
        return "\n\n".join(texts) or None
    if isinstance(output, Sequence) and output and all(isinstance(item, (BaseMessage, Document)) for item in output):
        return "\n\n".join(filter(None, (tool_output_text(item) for item in output))) or None
    model_dump_json = getattr(output, "model_dump_json", None)  # a pydantic model
    if callable(model_dump_json):
        try:
            return str(model_dump_json())
        except Exception:
            return str(output)
    if isinstance(output, (Mapping, Sequence, int, float, bool)):
        return _as_json(output)
    return str(output)


def tool_query(arguments: Any) -> str | None:
    """What a tool call searched for: its query argument (or its only argument, a string), else
    its arguments as JSON."""
    if isinstance(arguments, str):
        return arguments
    if not isinstance(arguments, Mapping) or not arguments:
        return None
    for key in TOOL_QUERY_KEYS:
        if isinstance(arguments.get(key), str):
            return arguments[key]
    if len(arguments) == 1 and isinstance(only := next(iter(arguments.values())), str):
        return only
    return _as_json(dict(arguments))


def source_id(document: Document) -> str | None:
    """What names a document's origin: its id, else its metadata's 'source'."""
    source = document.id or document.metadata.get("source")
    return None if source is None else str(source)


def history_session(config: Mapping[str, Any] | None) -> str | None:
    """RunnableWithMessageHistory's session id, in the runnable config its runs get (it is in the config's
    configurable, beside the message history it looked up, and never in the callbacks' metadata)."""
    configurable = config.get("configurable") if config else None
    if not isinstance(configurable, Mapping) or "message_history" not in configurable:
        return None
    session = configurable.get("session_id")
    return None if session is None else str(session)


def artifact_documents(output: Any) -> list[Document] | None:
    """The Documents a ``content_and_artifact`` tool returned beside its text (a vector store's search
    results, say): its ToolMessage's artifact, a Document or a list of them."""
    artifact = getattr(output, "artifact", None) if isinstance(output, ToolMessage) else None
    items = artifact if isinstance(artifact, Sequence) and not isinstance(artifact, str) else [artifact]
    documents = []
    for item in items:
        document = _as_document(item)
        if document is None:  # any other artifact: the tool's text stays its output
            return None
        documents.append(document)
    return documents or None


def _as_document(item: Any) -> Document | None:
    """A Document, or one a checkpointer's serializer turned into a dict (an earlier turn's artifact)."""
    if isinstance(item, Document):
        return item
    if isinstance(item, Mapping) and item.get("type") == "Document" and isinstance(item.get("page_content"), str):
        metadata = item.get("metadata")
        return Document(item["page_content"], id=item.get("id"), metadata=dict(metadata) if isinstance(metadata, Mapping) else {})
    return None


def is_error(message: Any) -> bool:
    """A ToolMessage that says its tool call failed (a handled ToolException, ToolNode's handle_tool_errors, a
    middleware's error message): the framework's own word, never guessed from the text."""
    return isinstance(message, ToolMessage) and message.status == "error"


def document_summary(document: Document) -> dict[str, Any]:
    return {
        "id": document.id,
        "source": document.metadata.get("source"),
        "metadata": scalar_metadata(document.metadata),
    }
