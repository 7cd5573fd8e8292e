"""The replayed RAG app the served-app tests share (test_lc_langserve.py, test_lc_langgraph_server.py): a retriever
and a chat model that answer by the token each question carries (``tok-`` and 8 hex digits), so that every
request's record can be told apart, and the check of the records that came back.

The passages and the answer repeat the token. A token whose number is divisible by 3 gets a planted answer: a
wrong number and an invented sentence (``lexical`` flags it; the faithful answer it passes).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.retrievers import BaseRetriever

TOKEN = re.compile(r"tok-([0-9a-f]{8})")


def planted(token: str) -> bool:
    return int(TOKEN.search(token).group(1), 16) % 3 == 0


def new_token(planted_one: bool) -> str:
    while True:
        token = f"tok-{uuid.uuid4().hex[:8]}"
        if planted(token) == planted_one:
            return token


def tokens_for(requests: dict[str, int]) -> dict[str, list[str]]:
    """A token per request, by kind of request; each kind gets a planted one and, where it takes more, faithful ones."""
    return {kind: [new_token(planted_one=(i + j) % 2 == 0) for j in range(count)]
            for i, (kind, count) in enumerate(requests.items())}


def question(token: str) -> str:
    return f"How long do refunds take for order {token}?"


def passages(token: str) -> list[str]:
    return [f"Refunds for order {token} are paid within 14 days of the return reaching the warehouse.",
            f"Order {token} ships free of charge."]


def faithful_answer(token: str) -> str:
    return f"Refunds for order {token} are paid within 14 days of the return reaching the warehouse."


def planted_answer(token: str) -> str:
    return (f"Refunds for order {token} are paid within 90 days. Every customer also receives a golden parrot "
            "voucher and free lifetime helicopter tours.")


def expected_answer(token: str) -> str:
    return planted_answer(token) if planted(token) else faithful_answer(token)


class TokenRetriever(BaseRetriever):
    """The order's passages: they repeat the question's token."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        token = TOKEN.search(query).group(0)
        return [Document(page_content=text, metadata={"source": source})
                for text, source in zip(passages(token), ["refunds.md", "shipping.md"], strict=True)]


class ReplayModel(BaseChatModel):
    """Answers the token of its prompt's last message: faithfully, or with a planted error; streams word by word."""

    @property
    def _llm_type(self) -> str:
        return "replay"

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> str:
        tokens = TOKEN.findall(str(messages[-1].content))
        return expected_answer(f"tok-{tokens[-1]}" if tokens else "tok-00000001")

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._reply(messages)))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for word in re.findall(r"\S+\s*", self._reply(messages)):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


def format_documents(documents: list[Document]) -> str:
    return "\n\n".join(document.page_content for document in documents)


def assert_the_records(rows: list[dict], tokens: dict[str, list[str]],
                       also: Callable[[str, str, dict], None] | None = None) -> None:
    """One record per request: its own question, its own retrieved passages, the model's final answer; the planted
    answers flagged by ``lexical`` and the faithful ones not. ``also(kind, token, record)``: a caller's own checks."""
    by_token: dict[str, list[dict]] = {}
    for row in rows:
        found = set(TOKEN.findall(row["record"]["question"] or ""))
        assert len(found) == 1, row["record"]
        by_token.setdefault(f"tok-{found.pop()}", []).append(row)
    sent = [token for group in tokens.values() for token in group]
    missing = [(kind, token) for kind, group in tokens.items() for token in group if token not in by_token]
    assert not missing, f"requests with no record: {missing}"
    assert sorted(by_token) == sorted(sent), f"records of requests never sent, or more than one a request: {by_token}"
    for kind, group in tokens.items():
        for token in group:
            [row] = by_token[token]
            record = row["record"]
            assert record["question"] == question(token), (kind, record)
            assert record["contexts"] == passages(token), (kind, record["contexts"])
            assert record["answer"] == expected_answer(token), (kind, record["answer"])
            if also is not None:
                also(kind, token, record)
            [score] = row["scores"]
            assert score["metric"] == "lexical" and score["error"] is None, score
            assert score["hallucinated"] is planted(token), (kind, token, score)
