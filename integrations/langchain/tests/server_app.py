"""A RAG endpoint as docs/how-to/servers.md teaches it, served by real servers in test_lc_servers.py: retrieval is a
function marked ``@groundtrace.retrieval``, the model is a LangChain chat model called by hand, and
``groundtrace_langchain.instrument()`` runs when the module is imported (under ``gunicorn --preload``: in the
master, before the workers are forked). Every request carries a token of its own in its question; the passages
and the answer repeat it, so a record holding two tokens holds two requests.

Three kinds of request: ``/rag`` retrieves then calls the model (one record each), ``/refuse`` retrieves then
answers without the model (no record: no model call), ``/chat`` calls the model without retrieving (no record:
nothing was retrieved). WSGI (``wsgi_app``, a Flask app; ``GT_MIDDLEWARE=1`` wraps it in
``groundtrace.WSGIMiddleware``), ASGI (``asgi_app``, a Starlette app; always wrapped in
``groundtrace.ASGIMiddleware``), and plain functions for process pools and Celery (``answer``, ``refuse``, ``chat``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import groundtrace
import groundtrace_langchain
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

TOKEN = re.compile(r"tok-[0-9a-f]{8}")


class EchoModel(BaseChatModel):
    """A chat model that answers from what it was given: the refund rule for the token of its prompt."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        text = " ".join(str(m.content) for m in messages)
        tokens = TOKEN.findall(text)
        token = tokens[-1] if tokens else "nobody"
        reply = f"Order {token} is refunded within 14 days." if "Passages:" in text else f"Hello {token}, how can I help?"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


class NoopHandler(BaseCallbackHandler):
    """A handler that does nothing: what the framework charges for any handler (benchmarks/server_cost.py)."""


MODEL = EchoModel()
# GT_ARM (benchmarks/server_cost.py): "groundtrace" (the default), "noop" (a handler that does nothing), "none"
ARM = os.environ.get("GT_ARM", "groundtrace")
MONITOR = groundtrace_langchain.instrument() if ARM == "groundtrace" else None  # at import: under --preload, the master's
CALLBACKS: list[Any] = [NoopHandler()] if ARM == "noop" else []


@groundtrace.retrieval
def search(question: str) -> list[str]:
    token = TOKEN.search(question).group(0)
    return [f"Order {token}: refunds are paid within 14 days of the return.", f"Order {token} ships free of charge."]


def answer(question: str) -> str:
    passages = search(question)
    prompt = "Answer from the passages.\nPassages:\n" + "\n".join(passages) + f"\nQuestion: {question}"
    return str(MODEL.invoke(prompt, config={"callbacks": CALLBACKS}).content)


def refuse(question: str) -> str:
    search(question)
    return "I cannot help with that."


def chat(question: str) -> str:
    return str(MODEL.invoke(question, config={"callbacks": CALLBACKS}).content)


KINDS = {"rag": answer, "refuse": refuse, "chat": chat}


def run(item: tuple[str, str]) -> str:
    """One request in a process pool or a task queue: (kind, question)."""
    kind, question = item
    return KINDS[kind](question)


def stats() -> dict[str, Any]:
    return {"pid": os.getpid(), **MONITOR.stats.as_dict()} if MONITOR is not None else {"pid": os.getpid()}


def _wsgi() -> Any:
    from flask import Flask, request

    app = Flask(__name__)

    @app.get("/<kind>")
    def serve(kind: str) -> str:
        return KINDS[kind](request.args["q"])

    if os.environ.get("GT_MIDDLEWARE") == "1":
        app.wsgi_app = groundtrace.WSGIMiddleware(app.wsgi_app)  # type: ignore[method-assign]
    return app


def _asgi() -> Any:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def serve(request: Request) -> PlainTextResponse:
        function = KINDS[request.path_params["kind"]]
        question = request.query_params["q"]
        if request.query_params.get("sync") == "1":  # a blocking handler, as FastAPI runs a def endpoint
            return PlainTextResponse(await run_in_threadpool(function, question))
        return PlainTextResponse(function(question))

    return Starlette(routes=[Route("/{kind}", serve)], middleware=[Middleware(groundtrace.ASGIMiddleware)])


wsgi_app = _wsgi() if os.environ.get("GT_SERVER") == "wsgi" else None
asgi_app = _asgi() if os.environ.get("GT_SERVER") == "asgi" else None
