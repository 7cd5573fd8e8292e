"""A guarded RAG endpoint served by real servers in test_lc_guard_server.py: an LCEL chain (a retriever, a chat model
that streams word by word) wrapped by ``groundtrace.guard(policy="redact", monitor=...)``, with
``groundtrace_langchain.instrument()`` on, as staging runs it: the guard's Score is the one the instrumented Monitor
records. The model plants a wrong price when the question says "planted". ``/ask`` awaits ``ainvoke``, ``/ask_sync``
runs ``invoke`` on Starlette's thread pool (a FastAPI def endpoint), ``/stream`` streams ``astream``."""

from __future__ import annotations

from typing import Any

import groundtrace
import groundtrace_langchain
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

PASSAGE = "The Larkfield museum opened in 1978. Entry costs 12 euros. It closes at 6 pm."
FAITHFUL = "The Larkfield museum opened in 1978. It closes at 6 pm."
PLANTED = "The Larkfield museum opened in 1978. Entry costs 15 euros. It closes at 6 pm."


class Museum(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=PASSAGE)]


class Model(BaseChatModel):
    """Answers the planted answer when the question asks for it, else the faithful one."""

    @property
    def _llm_type(self) -> str:
        return "museum"

    def _reply(self, messages: list[BaseMessage]) -> str:
        return PLANTED if "planted" in str(messages[-1].content) else FAITHFUL

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._reply(messages)))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        for word in self._reply(messages).split(" "):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word + " "))


PROMPT = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
CHAIN = ({"context": Museum() | (lambda docs: "\n".join(d.page_content for d in docs)),
          "question": RunnablePassthrough()} | PROMPT | Model() | StrOutputParser())
MONITOR = groundtrace_langchain.instrument()
GUARDED = groundtrace.guard(policy="redact", monitor=MONITOR).wrap(CHAIN)


async def ask(request: Request) -> PlainTextResponse:
    return PlainTextResponse(await GUARDED.ainvoke(request.query_params["q"]))


def ask_sync(request: Request) -> PlainTextResponse:
    return PlainTextResponse(GUARDED.invoke(request.query_params["q"]))


async def stream(request: Request) -> StreamingResponse:
    async def pieces() -> Any:
        async for piece in GUARDED.astream(request.query_params["q"]):
            yield piece.encode() + b"\x00"  # one frame per piece, so the test reads what each chunk held

    return StreamingResponse(pieces(), media_type="application/octet-stream")


async def chat(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/ask", ask), Route("/ask_sync", ask_sync), Route("/stream", stream),
                        Route("/chat", chat)])
