"""A small museum help desk for the agent tests: a corpus with one planted error, a scripted chat
model that calls tools (bind_tools works; it streams content word by word and tool calls as
chunks), a retriever tool and a plain @tool that searches a price table by itself. Nothing of
LangChain or LangGraph is mocked: the agents are the frameworks' own."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import create_retriever_tool, tool

from lc_app import KeywordRetriever

MUSEUM = [
    Document(id="hours", page_content="The city museum opens at 9 am and closes at 6 pm every day except Monday.",
             metadata={"source": "visit.md"}),
    Document(id="tickets", page_content="Adult tickets cost 20 euros when bought online and 25 euros at the door.",
             metadata={"source": "tickets.md"}),
    Document(id="students", page_content="Students and seniors pay half price on weekdays with a valid card.",
             metadata={"source": "tickets.md"}),
    Document(id="garden", page_content="Entry to the museum garden is free for everyone, all year round.",
             metadata={"source": "garden.md"}),
    # the planted error: a stale page that contradicts tickets.md
    Document(id="stale", page_content="Adult tickets cost 45 euros online since the 2019 price change.",
             metadata={"source": "archive.md"}),
]
DOC = {d.id: d for d in MUSEUM}
CURRENT = [d for d in MUSEUM if d.id != "stale"]  # what the agents search
PRICES = {"adult": "Adult ticket: 20 EUR online, 25 EUR at the door.",
          "student": "Student ticket: half price on weekdays (10 EUR online)."}


def museum_retriever(k: int = 1, documents: Sequence[Document] | None = None) -> KeywordRetriever:
    return KeywordRetriever(documents=list(documents or CURRENT), k=k)


def retriever_tool(k: int = 1, documents: Sequence[Document] | None = None) -> Any:
    return create_retriever_tool(museum_retriever(k, documents), "search_museum",
                                 "Search the museum's pages for visitor information.")


@tool
def lookup_prices(query: str) -> str:
    """Look up ticket prices in the museum's price table (no retriever: a plain dictionary)."""
    found = [line for key, line in PRICES.items() if key in query.lower()]
    return "\n".join(found) or "No price found."


@tool
def museum_clock() -> str:
    """The museum's local time."""
    return "It is 10:30 am at the museum on a Tuesday."


_ids = itertools.count(1)


def call(name: str, **args: Any) -> AIMessage:
    """A model reply that calls one tool."""
    return AIMessage("", tool_calls=[ToolCall(name=name, args=args, id=f"call_{next(_ids)}")])


def calls(*requests: tuple[str, dict[str, Any]]) -> AIMessage:
    """A model reply that calls several tools at once."""
    return AIMessage("", tool_calls=[ToolCall(name=name, args=args, id=f"call_{next(_ids)}") for name, args in requests])


Script = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Answers with the next scripted AIMessage (tool calls included), or with ``respond(messages)``.

    ``bind_tools`` returns the model itself: the script already knows which tools it calls. It
    streams like a real provider: content word by word, then the tool calls as one chunk."""

    replies: list[AIMessage] = []
    respond: Script | None = None
    inputs: list[list[BaseMessage]] = []  # what each call read, for the tests' own checks
    _lock: Any = None
    _position: int = 0

    def model_post_init(self, context: Any) -> None:
        self._lock = threading.Lock()
        self.inputs = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self.inputs.append(list(messages))
            if self.respond is not None:
                return self.respond(messages)
            if self._position >= len(self.replies):
                raise RuntimeError(f"the script has only {len(self.replies)} replies")
            reply = self.replies[self._position]
            self._position += 1
            return reply

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        reply = self._next(messages)
        text = reply.content if isinstance(reply.content, str) else ""
        for token in re.split(r"(\s)", text) if text else []:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        if reply.tool_calls:
            chunks = [{"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
                      for i, c in enumerate(reply.tool_calls)]
            chunk = ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def origin(document: Document, tool_name: str | None = None) -> dict[str, Any]:
    """What metadata["documents"] says of a document context."""
    found = {"id": document.id, "source": document.metadata.get("source"), "metadata": dict(document.metadata)}
    if tool_name is not None:
        found["tool"] = tool_name
    return found


def tool_origin(tool_name: str, call_id: str) -> dict[str, Any]:
    """What metadata["documents"] says of a tool output context."""
    return {"id": call_id, "source": None, "metadata": {}, "tool": tool_name}


def call_id(message: AIMessage, index: int = 0) -> str:
    return str(message.tool_calls[index]["id"])
