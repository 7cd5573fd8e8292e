"""Two LangGraph graphs as LangGraph's own server serves them (``langgraph dev``, its in-memory API server),
declared in langgraph.json and served in test_lc_langgraph_server.py:

- ``rag``: a StateGraph over ``{"question", "documents", "answer"}``, retrieve (a LangChain ``BaseRetriever``)
  -> generate (a chat model over a prompt of the passages and the question);
- ``chat``: the same two nodes over ``MessagesState``, the question the last human message and the answer an AI
  message appended to the thread's messages (what a chat front end such as LangGraph Studio sends).

The retriever and the model are replay_rag.py's (a token per question; some answers planted). With
``GT_ATTACH=instrument``, ``groundtrace_langchain.instrument()`` runs at import, in the process that serves the graphs (the test's own process imports this module for its helpers only).
"""

from __future__ import annotations

import os
from typing import Any, TypedDict

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langgraph.graph import END, START, MessagesState, StateGraph

from replay_rag import ReplayModel, TokenRetriever, format_documents

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
