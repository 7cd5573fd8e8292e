"""A LangServe app as the public ones ship it, served by uvicorn in test_lc_langserve.py: an LCEL chain
``{"context": retriever | format_documents, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()``
mounted with ``add_routes`` (invoke, batch, stream, stream_log, stream_events), beside two FastAPI routes of
the app's own: one that runs the chain with an int run id, one that streams ``astream_events`` (v1 or v2).

The retriever and the model are replay_rag.py's (a token per question; some answers planted). ``GT_ATTACH``
says how groundtrace is attached: ``instrument`` (``instrument()`` at import), ``config`` (``chain.with_config(callbacks=[GroundtraceCallbackHandler()])``), ``launcher`` (nothing in
the code: the app runs under ``groundtrace-run``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, StreamingResponse
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langserve import add_routes

from replay_rag import ReplayModel, TokenRetriever, format_documents

PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer the question from the context only.\n\nContext:\n{context}"),
    ("human", "{question}"),
])
chain: Any = ({"context": TokenRetriever() | format_documents, "question": RunnablePassthrough()}
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
