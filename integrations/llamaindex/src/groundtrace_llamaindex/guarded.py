"""Guard mode for LlamaIndex: ``groundtrace.guard(...).wrap(engine)`` gives back the query or chat engine with each
answer checked against the nodes it was written from before the caller gets it.

    engine = groundtrace.guard(policy="redact").wrap(index.as_query_engine())
    response = engine.query("What does entry cost?")      # .response is what may be shown
    response.metadata["groundtrace"]                      # {"action", "hallucinated", "reason", "spans"}

Query engines: ``query`` / ``aquery``, streaming ones too (the StreamingResponse's ``response_gen`` yields the guarded
pieces; the verdict is in ``metadata`` once it is read to its end). Chat engines: ``chat`` / ``achat`` /
``stream_chat`` / ``astream_chat``; the chat history keeps what the user was shown. Everything else is the engine's.
``wrap(engine, on_decision=f)`` also hands each Decision to ``f``.
The contexts are the response's ``source_nodes``; the question is the query string or the chat message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import Any

from groundtrace.guards import AsyncGuardedStream, Decision, Guard, GuardBlocked, GuardedStream
from groundtrace.guards.guard import off_loop
from groundtrace.monitor import Monitor
from groundtrace.privacy import Mask
from groundtrace.record import PendingRecord, Record, realize
from groundtrace.redaction import get_logger
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.base.response.schema import AsyncStreamingResponse, Response, StreamingResponse
from llama_index.core.chat_engine.types import AgentChatResponse, BaseChatEngine, StreamingAgentChatResponse
from llama_index.core.memory import BaseMemory
from llama_index.core.schema import NodeWithScore, QueryBundle

from groundtrace_llamaindex.tracker import GUARDING

log = get_logger("groundtrace.guard")
KEY = "groundtrace"  # the decision's place in a response's metadata
OnDecision = Callable[[Decision], None]


def wrap(guard: Guard, target: Any, *, on_decision: OnDecision | None = None) -> GuardedQueryEngine | GuardedChatEngine:
    """``target`` (a query or chat engine) guarded by ``guard``; the entry point ``Guard.wrap`` finds.
    ``on_decision``: called with each Decision (a raised one too), as groundtrace-langchain's wrap does."""
    if isinstance(target, BaseQueryEngine):
        return GuardedQueryEngine(guard, target, on_decision)
    if isinstance(target, BaseChatEngine):
        return GuardedChatEngine(guard, target, on_decision)
    raise TypeError(f"groundtrace guard: cannot wrap a {type(target).__qualname__}: LlamaIndex query engines "
                    "(BaseQueryEngine) and chat engines (BaseChatEngine) are guarded; an agent or workflow is not yet")


class GuardedTurn:
    """One guarded turn while the engine runs: an instrumented tracker's Record of it (the same capture staging
    uses) and that tracker's Monitor, which then delivers the guard's Score instead of scoring the answer again."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.record: Record | None = None
        self.monitor: Monitor | None = None
        self.mask: Mask | None = None

    def adopt(self, record: Record | PendingRecord, monitor: Monitor, mask: Mask | None) -> bool:
        """The tracker offers the turn's Record: taken once, when its Monitor scores with the guard's metrics."""
        if self.monitor is not None or [m.name for m in monitor.metrics] != [m.name for m in self.guard.metrics]:
            return False
        built = realize(record)
        if not isinstance(built, Record):
            return False
        self.record, self.monitor, self.mask = built, monitor, mask
        return True

    def __enter__(self) -> GuardedTurn:
        self._token = GUARDING.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        GUARDING.reset(self._token)


class _Guarded:
    """The engine, with what is not guarded handed to it."""

    def __init__(self, guard: Guard, engine: Any, on_decision: OnDecision | None = None) -> None:
        self.guard, self.engine, self.on_decision = guard, engine, on_decision

    def __getattr__(self, name: str) -> Any:
        if name in ("guard", "engine", "on_decision"):  # not set yet (a copy being made): no recursion into ourselves
            raise AttributeError(name)
        return getattr(self.engine, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine!r}, policy={self.guard.policy!r})"

    def _check(self, question: str, nodes: list[NodeWithScore], answer: str, turn: GuardedTurn | None = None) -> Decision:
        try:
            if turn is not None and turn.record is not None and turn.record.answer == answer:
                return self._told(self.guard.check_record(turn.record, monitor=turn.monitor, mask=turn.mask))
            return self._told(self.guard.check(question, _contexts(nodes), answer))
        except GuardBlocked as blocked:
            self._told(blocked.decision)
            raise

    async def _acheck(self, question: str, nodes: list[NodeWithScore], answer: str,
                      turn: GuardedTurn | None = None) -> Decision:
        return await off_loop(self._check, question, nodes, answer, turn)

    def _told(self, decision: Decision) -> Decision:
        if self.on_decision is not None:
            try:
                self.on_decision(decision)
            except Exception as error:  # the application's hook: said, never raised into the answer's path
                log.warning("groundtrace guard: on_decision failed (%s)", type(error).__name__)
        return decision


class GuardedQueryEngine(_Guarded):
    """A query engine whose responses are checked (see the module's docstring)."""

    def query(self, str_or_query_bundle: str | QueryBundle) -> Any:
        with GuardedTurn(self.guard) as turn:
            response = self.engine.query(str_or_query_bundle)
        return _guarded(self, _question(str_or_query_bundle), response, turn)

    async def aquery(self, str_or_query_bundle: str | QueryBundle) -> Any:
        with GuardedTurn(self.guard) as turn:
            response = await self.engine.aquery(str_or_query_bundle)
        return await _aguarded(self, _question(str_or_query_bundle), response, turn)


class GuardedChatEngine(_Guarded):
    """A chat engine whose replies are checked; its memory is told what the user was shown."""

    def chat(self, message: str, *args: Any, **kwargs: Any) -> Any:
        with GuardedTurn(self.guard) as turn:
            reply = self.engine.chat(message, *args, **kwargs)
        return self._reply(message, reply, turn)

    async def achat(self, message: str, *args: Any, **kwargs: Any) -> Any:
        with GuardedTurn(self.guard) as turn:
            reply = await self.engine.achat(message, *args, **kwargs)
        if isinstance(reply, StreamingAgentChatResponse):
            return self._reply(message, reply)
        decision = await self._acheck(_text(message), reply.source_nodes, reply.response, turn)
        await _aamend(self.engine, decision)
        return _replaced(reply, decision)

    def stream_chat(self, message: str, *args: Any, **kwargs: Any) -> Any:
        return self._reply(message, self.engine.stream_chat(message, *args, **kwargs))

    async def astream_chat(self, message: str, *args: Any, **kwargs: Any) -> Any:
        return self._reply(message, await self.engine.astream_chat(message, *args, **kwargs))

    def _reply(self, message: Any, reply: Any, turn: GuardedTurn | None = None) -> Any:
        if isinstance(reply, StreamingAgentChatResponse):
            return GuardedChatStream(self, _text(message), reply)
        if not isinstance(reply, AgentChatResponse):
            return reply  # a shape with no answer text to check
        decision = self._check(_text(message), reply.source_nodes, reply.response, turn)
        _amend(self.engine, decision)
        return _replaced(reply, decision)


class GuardedChatStream(StreamingAgentChatResponse):
    """A streamed chat reply whose ``response_gen`` / ``async_response_gen`` yield the guarded pieces; ``response``
    and ``metadata[KEY]`` are set once it has been read to its end."""

    def __init__(self, engine: GuardedChatEngine, question: str, reply: StreamingAgentChatResponse) -> None:
        super().__init__(sources=reply.sources, source_nodes=reply.source_nodes,
                         is_writing_to_memory=reply.is_writing_to_memory)
        self.metadata: dict[str, Any] = {}
        self._engine, self._question, self._reply = engine, question, reply

    @property
    def response_gen(self) -> Generator[str, None, None]:
        chunks = self._reply.response_gen  # a property: each read is a new generator
        stream = self._engine.guard.stream(self._question, _contexts(self.source_nodes), chunks)
        yield from _pieces(stream, chunks, self._done)
        _amend(self._engine.engine, stream.decision)

    async def async_response_gen(self) -> AsyncGenerator[str, None]:
        chunks = self._reply.async_response_gen()
        stream = self._engine.guard.astream(self._question, _contexts(self.source_nodes), chunks)
        async for piece in _apieces(stream, chunks, self._done):
            yield piece
        await _aamend(self._engine.engine, stream.decision)

    def _done(self, decision: Decision) -> None:
        self._engine._told(decision)
        self.metadata[KEY] = _verdict(decision)
        self.response = self.unformatted_response = decision.text.strip()


# ------------------------------------------------------------------------------------------ query responses
def _guarded(engine: _Guarded, question: str, response: Any, turn: GuardedTurn | None = None) -> Any:
    """``response`` as the caller may see it: a streamed one is guarded as it is read."""
    if isinstance(response, Response):
        if response.response is None:
            return response  # LlamaIndex's empty response: nothing was said
        return _replaced(response, engine._check(question, response.source_nodes, response.response, turn))
    if isinstance(response, StreamingResponse | AsyncStreamingResponse) and response.response_gen is not None:
        return _streamed(engine, question, response)
    return response  # a PydanticResponse (structured output) holds no text to check


def _streamed(engine: _Guarded, question: str, response: StreamingResponse | AsyncStreamingResponse) -> Any:
    """A new streaming response of the same type whose ``response_gen`` yields the guarded pieces."""
    metadata = dict(response.metadata or {})
    on_decision, contexts = _recorder(metadata, engine), _contexts(response.source_nodes)
    if isinstance(response, StreamingResponse):
        chunks = response.response_gen
        pieces = _pieces(engine.guard.stream(question, contexts, chunks), chunks, on_decision)
        return StreamingResponse(pieces, list(response.source_nodes), metadata)
    achunks = response.response_gen
    apieces = _apieces(engine.guard.astream(question, contexts, achunks), achunks, on_decision)
    return AsyncStreamingResponse(apieces, list(response.source_nodes), metadata)


async def _aguarded(engine: _Guarded, question: str, response: Any, turn: GuardedTurn | None = None) -> Any:
    """_guarded, the check of a whole answer off the event loop."""
    if isinstance(response, Response) and response.response is not None:
        return _replaced(response, await engine._acheck(question, response.source_nodes, response.response, turn))
    return _guarded(engine, question, response)


def _pieces(stream: GuardedStream, chunks: Iterator[str], on_decision: OnDecision) -> Generator[str, None, None]:
    """The guarded stream's pieces; the decision handed on when it is exhausted (or raised under ``raise``), and the
    model's stream closed however it ends (a reader that stops early, a GuardBlocked)."""
    try:
        yield from stream
    except GuardBlocked as blocked:
        on_decision(blocked.decision)
        raise
    else:
        if stream.decision is not None:
            on_decision(stream.decision)
    finally:
        close = getattr(chunks, "close", None)
        if callable(close):
            close()  # the LLM's stream, and LlamaIndex's writer behind it, end here too


async def _apieces(stream: AsyncGuardedStream, chunks: AsyncIterator[str],
                   on_decision: OnDecision) -> AsyncGenerator[str, None]:
    """_pieces for an async stream."""
    pieces = aiter(stream)
    try:
        async for piece in pieces:
            yield piece
    except GuardBlocked as blocked:
        on_decision(blocked.decision)
        raise
    else:
        if stream.decision is not None:
            on_decision(stream.decision)
    finally:
        for iterator in (pieces, chunks):  # ours first: it is reading the model's
            close = getattr(iterator, "aclose", None)
            if callable(close):
                await close()


# ------------------------------------------------------------------------------------------------- helpers
def _replaced(response: Any, decision: Decision) -> Any:
    """A copy of ``response`` (a Response or AgentChatResponse) delivering ``decision.text``, the verdict in its
    metadata."""
    metadata = dict(response.metadata or {})
    metadata[KEY] = _verdict(decision)
    return dataclasses.replace(response, response=decision.text, metadata=metadata)


def _recorder(metadata: dict[str, Any], engine: _Guarded) -> OnDecision:
    return lambda decision: metadata.__setitem__(KEY, _verdict(engine._told(decision)))


def _verdict(decision: Decision) -> dict[str, Any]:
    return {"action": decision.action, "hallucinated": decision.hallucinated, "reason": decision.reason,
            "spans": [[span.start, span.end, span.text] for span in decision.spans]}


def _contexts(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.get_content() for node in nodes]


def _question(str_or_query_bundle: str | QueryBundle) -> str:
    return str_or_query_bundle.query_str if isinstance(str_or_query_bundle, QueryBundle) else str(str_or_query_bundle)


def _text(message: Any) -> str:
    content = message.content if isinstance(message, ChatMessage) else message
    return str(content or "")


# ---------------------------------------------------------------------------------------------- chat memory
def _amended(messages: list[ChatMessage], decision: Decision | None) -> list[ChatMessage] | None:
    """The history with its last reply as the user saw it, or None when it needs no change: the next turn is
    written from the history, and must not build on an answer the guard took out."""
    if decision is None or decision.text == decision.answer or not decision.answer.strip() or not messages:
        return None
    last = messages[-1]
    # a stream the guard stopped was checked only up to there: the reply in memory goes on from it
    if last.role != MessageRole.ASSISTANT or not (last.content or "").strip().startswith(decision.answer.strip()):
        return None  # not the reply we checked (a memory that summarises, an agent's tool call): left as it is
    return [*messages[:-1], ChatMessage(role=MessageRole.ASSISTANT, content=decision.text.strip())]


def _memory(engine: Any) -> BaseMemory | None:
    memory = getattr(engine, "_memory", None) or getattr(engine, "memory", None)
    return memory if isinstance(memory, BaseMemory) else None


def _amend(engine: Any, decision: Decision | None) -> None:
    memory = _memory(engine)
    amended = _amended(memory.get_all(), decision) if memory is not None else None
    if memory is not None and amended is not None:
        memory.set(amended)


async def _aamend(engine: Any, decision: Decision | None) -> None:
    memory = _memory(engine)
    amended = _amended(await memory.aget_all(), decision) if memory is not None else None
    if memory is not None and amended is not None:
        await memory.aset(amended)
