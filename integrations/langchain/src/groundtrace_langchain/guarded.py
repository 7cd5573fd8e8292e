"""A LangChain Runnable or LangGraph graph guarded: ``guard.wrap(chain)`` runs the chain with groundtrace's capture
attached (the same callback the monitoring uses, so retrieval inside the chain needs no change), checks the answer
against the passages that reached it, and returns the chain's output with the text the guard delivers.

invoke, batch and their async forms check the whole answer; stream and astream check a streamed answer sentence by
sentence (groundtrace.guards.streams) against the passages retrieved so far, so under redact, replace and reask no
unsupported sentence is sent. With a GroundtraceCallbackHandler of the application's on the same run (attached, or
instrument()'s), the guard's Score is the one that handler's Monitor delivers: the answer is scored once.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, cast
from uuid import UUID, uuid4

from groundtrace.guards.decision import Decision
from groundtrace.guards.guard import Guard, off_loop
from groundtrace.monitor import Monitor
from groundtrace.record import PendingRecord, Record, realize
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config

from groundtrace_langchain.collector import COLLECTOR, GUARDED, Retrieval, ToolRun, log
from groundtrace_langchain.extract import ANSWER_KEYS, message_text, tool_output_text
from groundtrace_langchain.handler import GroundtraceCallbackHandler

OnDecision = Callable[[Decision], None]
_SAID: set[str] = set()  # the causes of an unchecked run already said at WARNING


class GuardedRun:
    """One guarded run's capture: the Record its root made (or why it made none), and the Monitor of an
    application's handler on the same run, which delivers the guard's Score instead of scoring it again."""

    def __init__(self, guard: Guard, run_id: UUID, capture: Any) -> None:
        self.guard, self.run_id, self.capture = guard, str(run_id), capture
        self.record: Record | None = None
        self.no_record: str | None = None
        self.monitor: Monitor | None = None
        self.mask: Any = None

    def adopt(self, monitor: Monitor) -> bool:
        """An application's handler offers its Monitor: taken when it scores with the guard's metrics."""
        if [m.name for m in monitor.metrics] != [m.name for m in self.guard.metrics] or self.monitor is not None:
            return False
        self.monitor = monitor
        return True


class _Capture:
    """What the guard's own handler submits to: the guarded run whose root it is (by run id)."""

    mask = None

    def __init__(self) -> None:
        self.said = threading.local()  # why the last root on this thread made no record (the handler says no run)

    def submit(self, record: Record | PendingRecord, **_: Any) -> bool:
        run = GUARDED.get(record.run_id or "")
        if run is not None:
            built = realize(record)
            if isinstance(built, Record):
                run.record = built
            else:
                run.no_record = built.message
        return True

    def note_no_record(self, reason: str) -> None:
        self.said.reason = reason


class GuardedRunnable(Runnable[Any, Any]):
    """``target`` with each answer checked by ``guard`` before it is returned (see the module's docstring)."""

    def __init__(self, guard: Guard, target: Runnable[Any, Any], answer_key: str | None = None,
                 on_decision: OnDecision | None = None) -> None:
        self.guard, self.target, self.answer_key, self.on_decision = guard, target, answer_key, on_decision
        self._capture = _Capture()
        self._handler = GroundtraceCallbackHandler(monitor=cast(Monitor, self._capture), answer_key=answer_key)

    @property
    def InputType(self) -> Any:  # noqa: N802 (LangChain's name)
        return self.target.InputType

    @property
    def OutputType(self) -> Any:  # noqa: N802
        return self.target.OutputType

    # ------------------------------------------------------------------------------------ whole answers
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        run, config = self._start(config)
        try:
            output = self.target.invoke(input, config, **kwargs)
        finally:
            GUARDED.pop(run.run_id, None)
        return self._guarded(run, output)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        run, config = self._start(config)
        try:
            output = await self.target.ainvoke(input, config, **kwargs)
        finally:
            GUARDED.pop(run.run_id, None)
        record = self._record(run, output)
        decision = None if record is None else await self.guard.acheck_record(record, monitor=run.monitor,
                                                                                mask=run.mask)
        return self._delivered(output, decision)

    def _guarded(self, run: GuardedRun, output: Any) -> Any:
        record = self._record(run, output)
        return self._delivered(output, None if record is None else self.guard.check_record(record, monitor=run.monitor, mask=run.mask))

    def _record(self, run: GuardedRun, output: Any) -> Record | None:
        if run.record is None:
            why = run.no_record or getattr(self._capture.said, "reason", None) or "no answer or passages"
            # said once per cause at WARNING (a chain that never retrieves would say it on every request), counted
            (log.debug if why in _SAID else log.warning)(
                "groundtrace guard: run %s made no record to check (%s): its output is delivered unchecked; "
                "guard.stats counts them as unchecked", run.run_id, why)
            _SAID.add(why)
            self.guard._count("checked", "unchecked")
        return run.record

    def _delivered(self, output: Any, decision: Decision | None) -> Any:
        if decision is None:
            return output
        if self.on_decision is not None:
            try:
                self.on_decision(decision)
            except Exception as error:  # the application's callback: said, never raised into its answer
                log.warning("groundtrace guard: on_decision failed (%s)", type(error).__name__)
        return with_answer(output, decision, self.answer_key)

    # ------------------------------------------------------------------------------------------- streams
    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        run, config = self._start(config)
        try:
            flow = _Flow(self, run)
            for chunk in self.target.stream(input, config, **kwargs):
                yield from flow.take(chunk)
                if flow.stopped:
                    break
            yield from flow.end()
        finally:
            GUARDED.pop(run.run_id, None)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        run, config = self._start(config)
        try:
            flow = _Flow(self, run)
            async for chunk in self.target.astream(input, config, **kwargs):
                # a chunk may begin a sentence and so run the previous one's check: off the event loop
                for out in await off_loop(flow.take, chunk) if flow.checks else flow.take(chunk):
                    yield out
                if flow.stopped:
                    break
            for out in await off_loop(flow.end):
                yield out
        finally:
            GUARDED.pop(run.run_id, None)

    # --------------------------------------------------------------------------------------------- capture
    def _start(self, config: RunnableConfig | None) -> tuple[GuardedRun, RunnableConfig]:
        """A run id of its own for the run (so that its root is known) and the guard's handler among its callbacks."""
        config = ensure_config(config)
        run = GuardedRun(self.guard, config.get("run_id") or uuid4(), self._capture)
        GUARDED[run.run_id] = run
        callbacks = config.get("callbacks")
        if callbacks is None:
            callbacks = [self._handler]
        elif isinstance(callbacks, BaseCallbackManager):
            callbacks = callbacks.copy()
            callbacks.add_handler(self._handler, inherit=True)
        else:
            callbacks = [*callbacks, self._handler]
        return run, cast(RunnableConfig, {**config, "callbacks": callbacks, "run_id": UUID(run.run_id)})

    def _live(self, run: GuardedRun) -> Record:
        """The run's Record once its root ended; before, the question and the passages retrieved so far."""
        if run.record is not None:
            return run.record
        root = COLLECTOR.roots.get((self._handler._scope, UUID(run.run_id).int))
        contexts: list[str] = []
        if root is not None:
            for source in list(root.sources):
                if isinstance(source, Retrieval) and source.documents and not source.nested:
                    contexts += [d.page_content for d in source.documents if d.page_content]
                elif isinstance(source, ToolRun) and source.ended and source.failed is None:
                    text = tool_output_text(source.output)
                    contexts += [text] if text else []
        question = root.inputs if root is not None and isinstance(root.inputs, str) else None
        if question is None and root is not None and isinstance(root.inputs, Mapping):
            found = next((root.inputs[k] for k in ("question", "input", "query") if k in root.inputs), None)
            question = found if isinstance(found, str) else None
        return Record(id=run.run_id, run_id=run.run_id, question=question, contexts=contexts, answer="")


class _Flow:
    """One guarded stream of a chain: what to send for each chunk the chain yields. Text and message chunks (and
    the (message, metadata) pairs of a graph's "messages" mode) go through the guard's sentence gate; the other
    events of such a stream pass at once. A stream of other values (a graph's updates or states) is held until the
    end and checked whole: under flag it passes untouched and is checked at its end."""

    def __init__(self, guarded: GuardedRunnable, run: GuardedRun) -> None:
        self.guarded, self.run = guarded, run
        self.flag = guarded.guard.policy == "flag"
        self.gate = guarded.guard.gate(lambda: guarded._live(run), deliver=False)
        self.kind: str | None = None  # "text", "message", "pair" or "other", by the first chunk
        self.held: list[Any] = []  # "other" chunks, until the decision
        self.last: Any = None  # the chunk whose shape a piece is sent in
        self.output: Any = None

    @property
    def checks(self) -> bool:
        return not self.flag and self.kind != "other"

    @property
    def stopped(self) -> bool:
        return self.gate.stopped

    def take(self, chunk: Any) -> list[Any]:
        if self.kind is None:
            self.kind = _kind(chunk)
        self.output = chunk if self.output is None else _added(self.output, chunk)
        if self.flag:
            return [chunk]
        if self.kind == "other":
            self.held.append(chunk)
            return []
        text = _answer_text(chunk)
        if text is None:  # a tool's call or result in a messages stream: not the answer
            return [chunk]
        self.last = chunk
        return [self._like(piece) for piece in self.gate.feed(text)]

    def end(self) -> list[Any]:
        guarded, run = self.guarded, self.run
        if self.kind is None:
            return []
        if self.flag or self.kind == "other":
            record = guarded._record(run, self.output)
            decision = None if record is None else guarded.guard.check_record(record, monitor=run.monitor,
                                                                            mask=run.mask)
            guarded._delivered(None, decision)
            if self.flag:
                return [] if decision is None or self.kind in ("text", "other") else [self._metadata(decision)]
            if decision is None or not decision.blocked:
                return self.held
            return [with_answer(chunk, decision, guarded.answer_key) for chunk in self.held]
        out = [self._like(piece) for piece in self.gate.finish()]
        decision = self.gate.decision
        if decision is not None:
            guarded.guard.deliver_streamed(guarded._live(run).model_copy(update={"answer": decision.answer}),
                                           decision, monitor=run.monitor, mask=run.mask)
            guarded._delivered(None, decision)
            if self.kind != "text":
                out.append(self._metadata(decision))
        return out

    def _like(self, piece: str) -> Any:
        """A delivered piece in the stream's own shape: text, a message chunk, or a (message chunk, metadata) pair."""
        if self.kind == "text":
            return piece
        if self.kind == "pair":
            message, metadata = self.last
            return AIMessageChunk(content=piece, id=message.id), metadata
        return AIMessageChunk(content=piece, id=getattr(self.last, "id", None))

    def _metadata(self, decision: Decision) -> Any:
        """The decision, on an empty message chunk that ends the stream (it adds to the streamed message)."""
        chunk = AIMessageChunk(content="", response_metadata={"groundtrace": decision.summary()})
        return (chunk, self.last[1]) if self.kind == "pair" and self.last is not None else chunk


def _kind(chunk: Any) -> str:
    if isinstance(chunk, str):
        return "text"
    if isinstance(chunk, BaseMessage):
        return "message"
    if isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[0], BaseMessage) \
            and isinstance(chunk[1], Mapping):
        return "pair"
    return "other"


def _answer_text(chunk: Any) -> str | None:
    """The answer's text in a stream's chunk; None for a chunk that is no part of it (a tool's call or result)."""
    if isinstance(chunk, str):
        return chunk
    message = chunk[0] if isinstance(chunk, tuple) else chunk
    if not isinstance(message, AIMessage | AIMessageChunk):  # a tool's result, the user's message
        return None
    if message.tool_calls or getattr(message, "tool_call_chunks", None):
        return None
    return message_text(message)


def with_answer(output: Any, decision: Decision, answer_key: str | None, depth: int = 0) -> Any:
    """The chain's output with the delivered text in place of the answer (only where the model's answer is: the
    first one, if it was asked again) and the decision where it carries metadata; one level down too (a graph's
    updates, ``{node: {"answer": ...}}``)."""
    original = (decision.answer if decision.reasked_from is None else decision.reasked_from).strip()
    if isinstance(output, str):  # the output itself is the answer; inside a state, the value that is
        return decision.text if depth == 0 or output.strip() == original else output
    if isinstance(output, AIMessage):
        if depth and message_text(output).strip() != original:
            return output
        return output.model_copy(update={"content": decision.text, "response_metadata": {
            **output.response_metadata, "groundtrace": decision.summary()}})
    if not isinstance(output, Mapping):
        return output
    keys = [answer_key] if answer_key else [k for k in ANSWER_KEYS if k in output]
    for key in keys:
        if key in output and (found := with_answer(output[key], decision, None, 1)) is not output[key]:
            return {**output, key: found}
    messages = output.get("messages")
    if isinstance(messages, list):
        for index in range(len(messages) - 1, -1, -1):
            if isinstance(messages[index], AIMessage):
                found = with_answer(messages[index], decision, None, 1)
                return output if found is messages[index] else \
                    {**output, "messages": [*messages[:index], found, *messages[index + 1:]]}
    if depth == 0:
        for key, value in output.items():
            if isinstance(value, Mapping) and (found := with_answer(value, decision, answer_key, 1)) is not value:
                return {**output, key: found}
    return output


def _added(output: Any, chunk: Any) -> Any:
    try:
        return output + chunk
    except TypeError:  # chunks that do not add up (a graph's updates): the last is the output
        return chunk


def wrap(guard: Guard, target: Runnable[Any, Any], *, answer_key: str | None = None,
         on_decision: OnDecision | None = None) -> GuardedRunnable:
    """``guard.wrap(chain)``: see GuardedRunnable. ``answer_key``: the key of a dict output (a graph's state) that
    holds the answer; ``on_decision``: called with each Decision (the text delivered is also the output's)."""
    if not isinstance(target, Runnable):
        raise TypeError(f"groundtrace guard: a LangChain Runnable or LangGraph graph is needed, got {type(target)}")
    return GuardedRunnable(guard, target, answer_key, on_decision)
