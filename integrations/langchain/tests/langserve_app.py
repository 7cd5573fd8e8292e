"""A LangServe app as the public ones ship it, served by uvicorn in test_lc_langserve.py: an LCEL chain
``{"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()``
mounted with ``add_routes`` (invoke, batch, stream, stream_log, stream_events), beside two FastAPI routes of
the app's own: one that runs the chain with an int run id, one that streams ``astream_events`` (v1 or v2).

Every question carries a token of its own (``tok-`` and 8 hex digits); the retriever's passages and the
model's answer repeat it. A token whose number is divisible by 3 gets a planted answer: a wrong number and
an invented sentence. ``GT_ATTACH`` says how groundtrace is attached: ``instrument`` (``instrument()`` at
import), ``config`` (``chain.with_config(callbacks=[GroundtraceCallbackHandler()])``), ``launcher`` (nothing in
the code: the app runs under ``groundtrace-run``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, StreamingResponse
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langserve import add_routes

TOKEN = re.compile(r"tok-([0-9a-f]{8})")


def planted(token: str) -> bool:
    return int(TOKEN.search(token).group(1), 16) % 3 == 0


def faithful_answer(token: str) -> str:
    return f"Refunds for order {token} are paid within 14 days of the return reaching the warehouse."


def planted_answer(token: str) -> str:
    return (f"Refunds for order {token} are paid within 90 days. Every customer also receives a golden parrot "
            "voucher and free lifetime helicopter tours.")


class TokenRetriever(BaseRetriever):
    """The order's passages: they repeat the question's token."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        token = TOKEN.search(query).group(0)
        return [Document(page_content=f"Refunds for order {token} are paid within 14 days of the return reaching "
                                      "the warehouse.", metadata={"source": "refunds.md"}),
                Document(page_content=f"Order {token} ships free of charge.", metadata={"source": "shipping.md"})]


class ReplayModel(BaseChatModel):
    """Answers the token of its prompt's question: faithfully, or with a planted error."""

    @property
    def _llm_type(self) -> str:
        return "replay"

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> str:
        token = TOKEN.findall(str(messages[-1].content))
        token_text = f"tok-{token[-1]}" if token else "tok-00000001"
        return planted_answer(token_text) if planted(token_text) else faithful_answer(token_text)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._reply(messages)))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        """Word by word, as a served model streams."""
        for word in re.findall(r"\S+\s*", self._reply(messages)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk


def format_docs(documents: list[Document]) -> str:
    return "\n\n".join(document.page_content for document in documents)


PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer the question from the context only.\n\nContext:\n{context}"),
    ("human", "{question}"),
])
chain: Any = ({"context": TokenRetriever() | format_docs, "question": RunnablePassthrough()}
              | PROMPT | ReplayModel() | StrOutputParser())

ATTACH = os.environ.get("GT_ATTACH", "instrument")
if ATTACH == "instrument":
    import groundtrace_langchain

    groundtrace_langchain.instrument()
elif ATTACH == "config":
    from groundtrace_langchain import GroundtraceCallbackHandler

    chain = chain.with_config(callbacks=[GroundtraceCallbackHandler()])

app = FastAPI(title="refunds")
add_routes(app, chain, path="/rag")


@app.get("/int")
def invoke_with_an_int_run_id(q: str, run: int) -> PlainTextResponse:
    """The app's own route: the chain run under an int run id (as some servers number their requests)."""
    return PlainTextResponse(chain.invoke(q, config={"run_id": run}))


@app.get("/events")
async def stream_events(q: str, version: str = "v2") -> StreamingResponse:
    """The app's own streaming route: the model's chunks of ``astream_events``, one JSON line each."""
    async def lines() -> AsyncIterator[str]:
        async for event in chain.astream_events(q, version=version):
            if event["event"] == "on_chat_model_stream":
                yield json.dumps({"chunk": event["data"]["chunk"].content}) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@app.get("/ready")
def ready() -> PlainTextResponse:
    return PlainTextResponse("ok")
