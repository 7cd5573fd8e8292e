"""Plain values out of the objects LlamaIndex hands to handlers: query strings, nodes, answers.

Every function answers None for a shape it does not know instead of raising: a handler must
never raise into LlamaIndex, and an unknown shape only means there is less to score.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
from llama_index.core.base.response.schema import PydanticResponse, Response
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

# Names under which LlamaIndex entry points take the user's input: chat engines' `message`, query
# engines' `str_or_query_bundle`; the others cover hand-written roots (see README, "Roots").
INPUT_ARGUMENTS = ("message", "str_or_query_bundle", "query_str", "query", "question")


@dataclass(frozen=True)
class NodeEntry:
    """One retrieved node as the Record keeps it."""

    id: str
    text: str
    score: float | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "score": self.score, "metadata": self.metadata}


def query_text(value: Any) -> str | None:
    """The text of a query, a QueryBundle or a chat message."""
    if isinstance(value, str):
        return value
    if isinstance(value, QueryBundle):
        return value.query_str
    if isinstance(value, ChatMessage):
        return value.content
    return None


def input_text(arguments: dict[str, Any]) -> str | None:
    """The user's input among the bound arguments of a root call, if it has one."""
    for name in INPUT_ARGUMENTS:
        text = query_text(arguments.get(name))
        if text is not None:
            return text
    return None


def node_entries(nodes: Iterable[Any] | None) -> list[NodeEntry]:
    entries = []
    for item in nodes or ():
        if not isinstance(item, NodeWithScore):
            continue
        node = item.node
        try:
            # the node's own text: metadata is what LlamaIndex adds to prompts, not what was retrieved
            text = node.get_content(metadata_mode=MetadataMode.NONE)
        except Exception:
            continue
        entries.append(NodeEntry(id=node.node_id, text=text, score=item.score, metadata=dict(node.metadata or {})))
    return entries


def answer_text(result: Any) -> str | None:
    """The answer in a finished (non-streaming) result of a query, a chat or a hand-written root."""
    if isinstance(result, str):
        return result
    if isinstance(result, AgentChatResponse):
        return result.response
    if isinstance(result, Response):
        return result.response
    if isinstance(result, PydanticResponse):
        return result.response.model_dump_json() if result.response is not None else None
    return None


def source_nodes(result: Any) -> list[Any]:
    """The nodes a response says it was synthesized from (after any node postprocessors)."""
    nodes = getattr(result, "source_nodes", None)
    return list(nodes) if isinstance(nodes, list) else []


def llm_output_text(response: Any) -> str | None:
    """The text of a CompletionResponse or a ChatResponse (from the LLM end events)."""
    if isinstance(response, CompletionResponse):
        return response.text
    if isinstance(response, ChatResponse):
        return response.message.content
    return None
