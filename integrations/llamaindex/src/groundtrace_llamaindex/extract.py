"""Plain values out of the objects LlamaIndex hands to handlers: query strings, nodes, answers,
model inputs and outputs, tool calls.

Every function answers None (or nothing) for a shape it does not know instead of raising: a handler
must never raise into LlamaIndex, and an unknown shape only means there is less to score.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groundtrace.record import MAX_CONTEXT_CHARS, MAX_INPUT_CHARS, cap
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.base.response.schema import PydanticResponse, Response
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from workflows.events import StopEvent

# Names under which LlamaIndex entry points take the user's input: chat engines' `message`, query
# engines' `str_or_query_bundle`, agents' `user_msg`; the others cover hand-written roots (README, "Roots").
INPUT_ARGUMENTS = ("message", "str_or_query_bundle", "user_msg", "query_str", "query", "question")
# Fields of a workflow's StartEvent that hold the user's input: AgentWorkflowStartEvent's `user_msg`,
# and the names hand-written workflows use (`wf.run(query=...)`).
START_EVENT_INPUTS = ("user_msg", "query", "question", "message", "query_str", "input")
# Keys of a dict a workflow returns as its result that hold the answer.
RESULT_KEYS = ("response", "answer", "output", "result")


@dataclass(frozen=True)
class NodeEntry:
    """One retrieved node as the Record keeps it."""

    id: str
    text: str
    score: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    length: int = 0  # the node's text's length before it was cut to MAX_CONTEXT_CHARS (0: not cut)


def query_text(value: Any) -> str | None:
    """The text of a query, a QueryBundle or a chat message."""
    if isinstance(value, str):
        return value
    if isinstance(value, QueryBundle):
        return value.query_str
    if isinstance(value, ChatMessage):
        return value.content
    return None


def input_text(arguments: Mapping[str, Any]) -> str | None:
    """The user's input among the bound arguments of a root call, if it has one."""
    for name in INPUT_ARGUMENTS:
        text = query_text(arguments.get(name))
        if text is not None:
            return text
    return None


def last_user_message(messages: Any) -> str | None:
    if not isinstance(messages, (list, tuple)):
        return None
    for message in reversed(messages):
        if isinstance(message, ChatMessage) and message.role == MessageRole.USER and message.content:
            return message.content
    return None


def start_event_question(event: Any) -> str | None:
    """The user's input in a workflow's StartEvent: ``user_msg`` (an agent's), a field named like a
    query, else the last user message of its ``chat_history``."""
    if event is None:
        return None
    # a typed field is an attribute; the rest (an AgentWorkflowStartEvent's user_msg too) sits in the
    # event's own dict, which attribute access reaches through pydantic's __getattr__ (~5 µs a name)
    fields = getattr(type(event), "model_fields", None) or {}
    to_dict = getattr(event, "to_dict", None)
    data = to_dict() if callable(to_dict) else None
    if not isinstance(data, Mapping):
        data = None

    def value_of(name: str) -> Any:
        if data is None or name in fields:
            return getattr(event, name, None)
        return data.get(name)

    for name in START_EVENT_INPUTS:
        text = query_text(value_of(name))
        if text:
            return text
    return last_user_message(value_of("chat_history"))


def node_entry(item: Any) -> NodeEntry | None:
    if not isinstance(item, NodeWithScore):
        return None
    node = item.node
    try:
        # the node's own text: metadata is what LlamaIndex adds to prompts, not what was retrieved
        text = node.get_content(metadata_mode=MetadataMode.NONE)
    except Exception:
        return None
    return NodeEntry(id=node.node_id, text=cap(text, MAX_CONTEXT_CHARS), score=item.score,
                     metadata=dict(node.metadata or {}), length=len(text) if len(text) > MAX_CONTEXT_CHARS else 0)


def final_result(result: Any) -> Any:
    """What a workflow run returned to its caller: the StopEvent's result (a custom StopEvent
    subclass is its own result)."""
    if isinstance(result, StopEvent):
        inner = result.result
        return result if inner is None else inner
    return result


def answer_text(result: Any) -> str | None:
    """The answer in a finished (non-streaming) result of a query, a chat, an agent, a workflow or
    a hand-written root."""
    result = final_result(result)
    if isinstance(result, str):
        return result
    if isinstance(result, (AgentChatResponse, Response)):
        return result.response
    if isinstance(result, PydanticResponse):
        return result.response.model_dump_json() if result.response is not None else None
    if isinstance(result, ChatMessage):  # an agent's AgentOutput.response, or a workflow's reply
        return result.content
    if isinstance(result, (ChatResponse, CompletionResponse)):
        return llm_output_text(result)
    if isinstance(result, Mapping):
        for key in RESULT_KEYS:
            value = result.get(key)
            if isinstance(value, str):
                return value
        return None
    response = getattr(result, "response", None)  # AgentOutput, a StopEvent subclass, objects alike
    if response is not None and response is not result:
        return answer_text(response)
    return None


def source_nodes(result: Any) -> list[Any]:
    """The nodes a response says it was synthesized from (after any node postprocessors)."""
    nodes = getattr(final_result(result), "source_nodes", None)
    return list(nodes) if isinstance(nodes, list) else []


def llm_output_text(response: Any) -> str | None:
    """The text of a CompletionResponse or a ChatResponse (from the LLM end events), or of a
    stream read to its end."""
    if isinstance(response, str):
        return response
    if isinstance(response, CompletionResponse):
        return response.text
    if isinstance(response, ChatResponse):
        return response.message.content
    return None


def response_id(response: Any) -> str | None:
    """The id the model's provider gave a reply (OpenAI's "chatcmpl-..."), for ``gen_ai.response.id``: read
    from the ChatResponse's or CompletionResponse's ``raw`` (the provider's response object or dict)."""
    raw = getattr(response, "raw", None)
    found = raw.get("id") if isinstance(raw, Mapping) else getattr(raw, "id", None)
    return found if isinstance(found, str) and found else None


def model_input_text(value: Any) -> str | None:
    """A model call's input as text: a completion's prompt, or a chat's messages, one per line."""
    if isinstance(value, str):
        return cap(value, MAX_INPUT_CHARS)
    if isinstance(value, (list, tuple)):
        return cap("\n".join(f"{message.role.value}: {cap(message.content or '', MAX_INPUT_CHARS)}"
                              for message in value if isinstance(message, ChatMessage)), MAX_INPUT_CHARS)
    return None


@dataclass(frozen=True)
class ToolMessage:
    """A tool's output as a chat model read it (a ``tool`` message of its input)."""

    text: str
    name: str | None
    call_id: str | None


def tool_messages(value: Any) -> list[ToolMessage]:
    """The tool-role messages of a chat model's input, each with its tool's name when an assistant
    message of the same input asked for that call."""
    if not isinstance(value, (list, tuple)):
        return []
    names: dict[str, str] = {}
    for message in value:
        if isinstance(message, ChatMessage) and message.role == MessageRole.ASSISTANT:
            for block in message.blocks:
                if isinstance(block, ToolCallBlock) and block.tool_call_id:
                    names[block.tool_call_id] = block.tool_name
    found = []
    for message in value:
        if isinstance(message, ChatMessage) and message.role == MessageRole.TOOL and message.content:
            extra = message.additional_kwargs or {}
            call_id = extra.get("tool_call_id")
            call_id = call_id if isinstance(call_id, str) else None
            name = extra.get("name") if isinstance(extra.get("name"), str) else names.get(call_id or "")
            found.append(ToolMessage(message.content, name, call_id))
    return found


def tool_query(arguments: Mapping[str, Any]) -> str | None:
    """The query a tool call was given, from the bound arguments of ``BaseTool.call`` / ``acall``
    (``*args, **kwargs``): its one string argument, or its plain arguments as JSON."""
    values: dict[str, Any] = {}
    args = arguments.get("args")
    for index, value in enumerate(args if isinstance(args, tuple) else ()):
        values[str(index)] = value
    kwargs = arguments.get("kwargs")
    if isinstance(kwargs, Mapping):
        values.update(kwargs)
    plain = {key: value for key, value in values.items() if isinstance(value, (str, int, float, bool))}
    texts = [value for value in plain.values() if isinstance(value, str)]
    if len(plain) == 1 and len(texts) == 1:
        return texts[0]
    if not plain:
        return None
    return json.dumps(plain, ensure_ascii=False, sort_keys=True)


def tool_artifact_nodes(output: Any) -> list[NodeWithScore]:
    """The nodes a tool returned as its raw output (a NodeWithScore, a node, or a list of them): the
    documents its text was serialized from. Empty when the raw output is anything else."""
    raw = getattr(output, "raw_output", None)
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    nodes = [NodeWithScore(node=item) if isinstance(item, BaseNode) else item for item in items]
    scored = [node for node in nodes if isinstance(node, NodeWithScore)]
    return scored if scored and len(scored) == len(nodes) else []


def memory_session_id(memory: Any) -> str | None:
    """The conversation a LlamaIndex memory keeps: a ``Memory``'s ``session_id``, or the key a
    ``ChatMemoryBuffer`` keeps its messages under in its chat store (unless it is the default key,
    which every buffer shares and so names no conversation)."""
    session_id = getattr(memory, "session_id", None)
    if isinstance(session_id, str) and session_id:
        return session_id
    key = getattr(memory, "chat_store_key", None)
    return key if isinstance(key, str) and key and key != DEFAULT_CHAT_STORE_KEY else None


def root_session_id(arguments: Mapping[str, Any], instance: Any, start_event: Any) -> str | None:
    """The conversation a root call belongs to, as LlamaIndex knows it: the memory an agent's run
    was given (its start event's ``memory``), or a chat engine's own memory."""
    memory = None
    if start_event is not None:
        data = getattr(start_event, "to_dict", None)
        values = data() if callable(data) else None
        memory = values.get("memory") if isinstance(values, Mapping) else None
    if memory is None:
        memory = arguments.get("memory")
    if memory is None and instance is not None:
        memory = getattr(instance, "_memory", None)
    return memory_session_id(memory) if memory is not None else None
