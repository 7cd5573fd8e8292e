"""Two LangGraph graphs as LangGraph's own server serves them (``langgraph dev``, its in-memory API server),
declared in langgraph.json and served in test_lc_langgraph_server.py:

- ``rag``: a StateGraph over ``{"question", "documents", "answer"}``, retrieve (a LangChain ``BaseRetriever``)
  -> generate (a chat model over a prompt of the passages and the question);
- ``chat``: the same two nodes over ``MessagesState``, the question the last human message and the answer an AI
  message appended to the thread's messages (what a chat front end such as LangGraph Studio sends).

Every question carries a token of its own (``tok-`` and 8 hex digits); the retriever's passages and the
model's answer repeat it. A token whose number is divisible by 3 gets a planted answer: a wrong number and
an invented sentence. With ``GT_ATTACH=instrument``, ``groundtrace_langchain.instrument()`` runs at import, in
the process that serves the graphs (the test's own process imports this module for its helpers only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any, TypedDict

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, MessagesState, StateGraph

TOKEN = re.compile(r"tok-([0-9a-f]{8})")


def planted(token: str) -> bool:
    return int(TOKEN.search(token).group(1), 16) % 3 == 0


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
    """Answers the token of its prompt's last message: faithfully, or with a planted error."""

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
        """Word by word, as a served model streams (LangChain reports each chunk to the callbacks itself: the
        server's ``messages`` stream mode sends them)."""
        for word in re.findall(r"\S+\s*", self._reply(messages)):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


def format_documents(documents: list[Document]) -> str:
    return "\n\n".join(document.page_content for document in documents)


retriever = TokenRetriever()
model = ReplayModel()


class RagState(TypedDict, total=False):
    question: str
    documents: list[Document]
    answer: str


RAG_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer the question from the context only.\n\nContext:\n{context}"),
    ("human", "{question}"),
])


def retrieve(state: RagState) -> dict[str, Any]:
    return {"documents": retriever.invoke(state["question"])}


def generate(state: RagState) -> dict[str, Any]:
    prompt = RAG_PROMPT.invoke({"context": format_documents(state["documents"]), "question": state["question"]})
    return {"answer": model.invoke(prompt).content}


rag_builder = StateGraph(RagState)
rag_builder.add_node("retrieve", retrieve)
rag_builder.add_node("generate", generate)
rag_builder.add_edge(START, "retrieve")
rag_builder.add_edge("retrieve", "generate")
rag_builder.add_edge("generate", END)
rag = rag_builder.compile()  # the server adds its own checkpointer: no checkpointer here


class ChatState(MessagesState):
    documents: list[Document]


CHAT_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer the user from the context only.\n\nContext:\n{context}"),
    MessagesPlaceholder("messages"),
])


def retrieve_for_chat(state: ChatState) -> dict[str, Any]:
    question = next(message for message in reversed(state["messages"]) if message.type == "human")
    return {"documents": retriever.invoke(str(question.content))}


def answer_the_chat(state: ChatState) -> dict[str, Any]:
    prompt = CHAT_PROMPT.invoke({"context": format_documents(state["documents"]), "messages": state["messages"]})
    return {"messages": [model.invoke(prompt)]}


chat_builder = StateGraph(ChatState)
chat_builder.add_node("retrieve", retrieve_for_chat)
chat_builder.add_node("generate", answer_the_chat)
chat_builder.add_edge(START, "retrieve")
chat_builder.add_edge("retrieve", "generate")
chat_builder.add_edge("generate", END)
chat = chat_builder.compile()

if os.environ.get("GT_ATTACH") == "instrument":
    import groundtrace_langchain

    groundtrace_langchain.instrument()
