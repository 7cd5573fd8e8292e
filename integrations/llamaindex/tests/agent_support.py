"""Real LlamaIndex parts for agent and workflow tests: a function-calling chat model that plays a
script (tool calls, then a reply, streamed token by token when the agent streams), and an
embedding that scores by shared keywords, so that retrieval scores differ and cut-offs bite."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any
import pytest

from li_support import DOCUMENTS, TOP_K
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole, ToolCallBlock
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.tools import FunctionTool
from pydantic import PrivateAttr

# what the agents in the tests answer: not what the documents say (1 879 rubles)
HALLUCINATED = "The SPbU dormitory costs 2,500 rubles a month."
USER_MSG = "How much does the SPbU dormitory cost per month?"
SEARCH = "dormitory fee"  # what the scripted model searches for


@dataclass(frozen=True)
class Call:
    """A scripted tool call."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


class ScriptedAgentLLM(MockFunctionCallingLLM):
    """Each chat call plays the next step of ``steps``: a Call (the model asks for that tool) or a
    text (its reply). Running out of steps raises: an agent that called the model more often than
    the test planned fails the test."""

    _steps: list[Call | str] = PrivateAttr(default_factory=list)
    _done: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, steps: list[Call | str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steps = list(steps)
        self.response_generator = self._next

    @property
    def calls_made(self) -> int:
        return self._done

    def _next(self, messages: Any, **kwargs: Any) -> ChatMessage:
        with self._lock:
            if self._done >= len(self._steps):
                raise AssertionError(f"the script has {len(self._steps)} steps; the agent asked for more")
            step, index = self._steps[self._done], self._done
            self._done += 1
        if isinstance(step, Call):
            block = ToolCallBlock(tool_call_id=f"call-{index}", tool_name=step.tool, tool_kwargs=step.arguments)
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])
        return ChatMessage(role=MessageRole.ASSISTANT, content=step)

    @llm_chat_callback()
    async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
        message = self._next(messages, **kwargs)

        async def tokens() -> Any:
            if not message.content:  # a tool call comes whole
                yield ChatResponse(message=message, delta="")
                return
            text = ""
            for token in re.findall(r"\S+\s*", message.content):
                text += token
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=token)

        return tokens()


VOCABULARY = ("dormitory", "fee", "rubles", "month", "capital", "paris")


class KeywordEmbedding(BaseEmbedding):
    """A vector of (1, count of each VOCABULARY word): cosine similarity counts shared keywords."""

    def _vector(self, text: str) -> list[float]:
        words = re.findall(r"\w+", text.lower())
        return [1.0, *(float(words.count(word)) for word in VOCABULARY)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def build_keyword_index() -> VectorStoreIndex:
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=0, id_func=lambda i, doc: f"{doc.doc_id}#{i}")
    # the metadata is left out of the embedded text, so that only the words of each text count
    documents = [document.model_copy() for document in DOCUMENTS]
    for document in documents:
        document.excluded_embed_metadata_keys = list(document.metadata)
    return VectorStoreIndex.from_documents(documents, embed_model=KeywordEmbedding(), transformations=[splitter])


def search_tool(index) -> FunctionTool:
    retriever = index.as_retriever(similarity_top_k=TOP_K)

    def search_docs(query: str) -> str:
        """Search the university's documents."""
        return "\n\n".join(node.node.get_content() for node in retriever.retrieve(query))

    return FunctionTool.from_defaults(search_docs)


def clock_tool() -> FunctionTool:
    def clock() -> str:
        """The date today."""
        return "Today is Monday, the 2nd of March 2026."

    return FunctionTool.from_defaults(clock)


def searching_agent(index, *replies: str, streaming: bool = False) -> FunctionAgent:
    """A FunctionAgent whose model searches the documents once (search_docs), then replies."""
    return FunctionAgent(tools=[search_tool(index)], streaming=streaming,
                         llm=ScriptedAgentLLM([Call("search_docs", {"query": SEARCH}), *(replies or [HALLUCINATED])]))


# the two documents the search tool returns, as metadata["nodes"] lists them
NODES_IN_TOOL = [
    {"id": "dorm-en#0", "score": pytest.approx(1.0), "metadata": {"lang": "en", "source": "spbu.ru/en/dorm"},
     "tool": "search_docs"},
    {"id": "dorm-ru#0", "score": pytest.approx(1.0), "metadata": {"lang": "ru", "source": "spbu.ru/dorm"},
     "tool": "search_docs"},
]
