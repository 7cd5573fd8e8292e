"""``groundtrace.turn``: the turn itself, for code with no framework callback at all (the OpenAI SDK over a
vector database's client).

``with groundtrace.turn(question) as t: ...; t.answer = text``, or ``@groundtrace.turn`` on the function that
answers (the question is its first string argument or its ``question``/``query``/``input``/``message``
argument; the answer its return value, or what a generator yields, joined). The contexts are what the
``@groundtrace.retrieval`` functions called inside return (:mod:`groundtrace.capture.marked`), or what
``t.add_contexts(...)`` is given. It submits one Record to the same Monitor as the callbacks (``monitor=``,
else the process-wide one configured from ``GROUNDTRACE_*``), in the same conversation
(``groundtrace.session``, or ``session_id=``) and trace (the current OpenTelemetry span, else a
``invoke_workflow {name}`` span of its own where an SDK is installed). A framework turn that runs inside it and
makes its own Record is that Record: the block makes none of its own unless contexts were given to it
directly.

On the application's thread this only keeps references: the Record is built in the Monitor's worker.
Nothing here raises into the application: a failure of groundtrace's own is logged once and counted
(:func:`stats`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from groundtrace.capture.carried import choose, item_origin
from groundtrace.capture.generators import Watch, wrap_async_generator, wrap_generator
from groundtrace.record import CUT_FROM, bounded
from groundtrace.capture.marked import COUNTS, Retrieved, count_failure, current_turn, function_name, query_of
from groundtrace.capture.session import current_session
from groundtrace.capture.stats import CaptureStats
from groundtrace.record import EXCLUDED, NO_TEXT, NOT_EXCLUDED, PendingRecord, Record
from groundtrace.trace_context import current_links, otel_ids

F = TypeVar("F", bound=Callable[..., Any])
TRACER_NAME = "groundtrace.turn"

NO_ANSWER = "no answer"
NO_ANSWER_HINT = "the turn's function returned no text and nothing set turn.answer"
NO_CONTEXTS = "no contexts"
NO_CONTEXTS_HINT = ("nothing marked its contexts: call a function decorated with @groundtrace.retrieval inside the "
                    "turn, or turn.add_contexts(...) (docs: troubleshooting, 'I see no scores')")


# ------------------------------------------------------------------------------------ the turn
def stats() -> CaptureStats:
    """Where every :func:`turn` went (the integrations' shape: recorded, no_record per reason, failed)."""
    return COUNTS.snapshot(in_flight=_open_turns())


_open = 0
_open_lock = threading.Lock()


def _open_turns() -> int:
    with _open_lock:
        return _open


def _opened(step: int) -> None:
    global _open
    with _open_lock:
        _open += step


def claim_for_framework() -> None:
    """An integration recorded a turn: if a :func:`turn` is open around it, that turn's Record is the
    framework's (one ContextVar read when none is)."""
    scope = current_turn.get()
    if isinstance(scope, TurnScope):
        scope.framework_turns += 1


def answer_text(value: Any) -> str | None:
    """An answer in the shapes functions return: a string, a chat message or completion (``.content``,
    ``.text``, ``.output_text``), a dict's answer/output/response/result/text, and the providers' bodies as SDK
    objects or raw JSON: OpenAI chat completions (``choices[0].message.content``) and responses (``output`` messages'
    ``output_text`` parts), Anthropic messages (``content`` blocks' ``text``), Gemini (``candidates[0].content.parts``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("answer", "output", "response", "result", "text", "content", "output_text"):
            if isinstance(value.get(key), str):
                return value[key]
        return _provider_text(value)
    for attribute in ("content", "text", "response", "output_text"):
        found = getattr(value, attribute, None)
        if isinstance(found, str):
            return found
    return _provider_text(value)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) and value else None


def _block_texts(blocks: Any) -> str | None:
    """The text of a list of content blocks (Anthropic's ``{"type": "text", "text"}``, OpenAI responses'
    ``output_text`` parts, Gemini's parts), joined; None when none has text."""
    if not isinstance(blocks, (list, tuple)):
        return None
    texts = [text for block in blocks if isinstance(text := _field(block, "text"), str)]
    return "".join(texts) if texts else None


def _provider_text(value: Any) -> str | None:
    message = _field(_first(_field(value, "choices")), "message")  # OpenAI chat completions
    if message is not None:
        content = _field(message, "content")
        return content if isinstance(content, str) else _block_texts(content)
    candidate = _first(_field(value, "candidates"))  # Gemini
    if candidate is not None:
        return _block_texts(_field(_field(candidate, "content"), "parts"))
    content = _field(value, "content")  # Anthropic messages
    if isinstance(content, (list, tuple)):
        return _block_texts(content)
    output = _field(value, "output")  # OpenAI responses: the message items' parts
    if isinstance(output, (list, tuple)):
        texts = [text for item in output if _field(item, "type") == "message"
                 and (text := _block_texts(_field(item, "content")))]
        return "".join(texts) if texts else None
    return None


class TurnScope:
    """One turn of an application with no framework callback: a block, or a decorated function's call.

    Set ``answer`` (and ``question``, when the block did not get it) before the block ends;
    ``add_contexts(value)`` gives contexts directly (as ``@groundtrace.retrieval`` would). ``metadata``
    (scalar values) goes on the Record; ``id`` names it (default: a fresh one)."""

    def __init__(self, question: str | None = None, *, answer: str | None = None, session_id: str | None = None,
                 metadata: Mapping[str, Any] | None = None, monitor: Any = None, mask: Any = None,
                 sample_rate: float | None = None, name: str | None = None) -> None:
        self.question = question
        self.answer = answer
        self.session_id = session_id
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.name = name
        self.monitor = monitor
        self.mask = mask
        self.sample_rate = sample_rate
        self.retrievals: list[Retrieved] = []
        self.framework_turns = 0
        self.open = False
        self.id: str | None = None
        self._token: contextvars.Token[Any] | None = None
        self._span: Any = None
        self._ids: tuple[str, str] | None = None
        self._links: dict[str, str] = {}

    def add_contexts(self, value: Any, name: str = "add_contexts") -> None:
        """Contexts of this turn, given directly (any value ``@groundtrace.retrieval`` reads)."""
        self.retrievals.append(Retrieved(name, None, value))

    # ------------------------------------------------------------------------ as a block
    def __enter__(self) -> TurnScope:
        self._start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        self._end(error)

    async def __aenter__(self) -> TurnScope:
        return self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        self.__exit__(kind, error, traceback)

    def _start(self) -> None:
        self.open = True
        self.id = self.id or str(uuid.uuid4())
        self._token = current_turn.set(self)
        _opened(1)
        COUNTS.root()
        try:
            self.session_id = self.session_id or current_session()
            self._ids = otel_ids()
            if self._ids is None:
                from groundtrace.capture.kit import start_request_span

                self._span = start_request_span(TRACER_NAME, {"openinference.span.kind": "CHAIN"},
                                                workflow=self.name or "groundtrace.turn")
                self._ids = otel_ids(self._span) if self._span is not None else None
            self._links = current_links()
        except Exception:
            count_failure("groundtrace.turn (start)")

    def _end(self, error: BaseException | None) -> None:
        self.open = False
        _opened(-1)
        if self._token is not None:
            try:
                current_turn.reset(self._token)
            except ValueError:  # ended in another context (a generator closed elsewhere): nothing to restore
                pass
            self._token = None
        try:
            if self._span is not None:
                from groundtrace.capture.kit import end_request_span
                from groundtrace.privacy import load_mask

                end_request_span(self._span, error,
                                 mask=load_mask(self.mask) or getattr(self.monitor, "mask", None) if error else None)
            if error is not None:
                COUNTS.failed("its answer is not scored")
                return
            self._submit()
        except Exception:
            count_failure("groundtrace.turn (end)")
            COUNTS.unreadable()

    def _submit(self) -> None:
        if self.framework_turns and not self.retrievals:
            COUNTS.not_turn()  # an integration recorded the turn that ran inside: that Record is this turn's
            return
        monitor = self.monitor
        if monitor is None:
            from groundtrace.capture.kit import shared_monitor

            monitor = shared_monitor()
        reason, hint = (NO_ANSWER, NO_ANSWER_HINT) if not self.answer else \
            (NO_CONTEXTS, NO_CONTEXTS_HINT) if not self.retrievals else (None, "")
        if reason is not None:
            COUNTS.no_record(reason, hint, warn=True)
            note = getattr(monitor, "note_no_record", None)
            if callable(note):
                note(reason)
            return
        monitor.submit(ExplicitTurn(self), sample_rate=self.sample_rate, mask=self.mask)
        COUNTS.recorded(False)

    # -------------------------------------------------------------------- as a decorator
    def __call__(self, function: F) -> F:
        options: dict[str, Any] = dict(session_id=self.session_id, metadata=self.metadata, monitor=self.monitor, mask=self.mask,
                       sample_rate=self.sample_rate)
        label = self.name or function_name(function)

        def scope_for(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> TurnScope:
            return TurnScope(query_of(function, args, kwargs), name=label, **options)

        if inspect.isasyncgenfunction(function):
            return wrap_async_generator(function, _TurnOf(scope_for))  # type: ignore[return-value]
        if inspect.isgeneratorfunction(function):
            return wrap_generator(function, _TurnOf(scope_for))  # type: ignore[return-value]
        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with scope_for(args, kwargs) as scope:
                    value = await function(*args, **kwargs)
                    scope.answer = scope.answer or safe_answer_text(value)
                return value

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope_for(args, kwargs) as scope:
                value = function(*args, **kwargs)
                scope.answer = scope.answer or safe_answer_text(value)
            return value

        return wrapper  # type: ignore[return-value]


def safe_answer_text(value: Any) -> str | None:
    """:func:`answer_text`, never raising into the application: a value whose attributes raise (an unread
    streaming response, an object whose ``__getattr__`` fails) is no answer, counted."""
    try:
        return answer_text(value)
    except Exception:
        count_failure("groundtrace.turn (reading the answer)")
        return None


def _joined(parts: list[Any]) -> str | None:
    texts = [text for text in (safe_answer_text(part) for part in parts) if text]
    return "".join(texts) or None


class _TurnOf(Watch[tuple["TurnScope", list[Any], contextvars.Context]]):
    """A turn generator: its turn lives in a context of its own (a copy of the caller's) where every step runs;
    its answer is what it yielded, joined."""

    def __init__(self, scope_for: Callable[[tuple[Any, ...], Mapping[str, Any]], TurnScope]) -> None:
        self.scope_for = scope_for

    def begin(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
              ) -> tuple[tuple[TurnScope, list[Any], contextvars.Context], contextvars.Context]:
        scope, context = self.scope_for(args, kwargs), contextvars.copy_context()
        context.run(scope._start)
        return (scope, [], context), context

    def seen(self, state: tuple[TurnScope, list[Any], contextvars.Context], item: Any) -> None:
        state[1].append(item)

    def end(self, state: tuple[TurnScope, list[Any], contextvars.Context], error: BaseException | None,
            closed: bool) -> None:
        scope, parts, context = state
        scope.answer = scope.answer or _joined(parts)
        context.run(scope._end, error)


@overload
def turn(question: F) -> F: ...
@overload
def turn(question: str | None = None, **options: Any) -> TurnScope: ...


def turn(question: Any = None, **options: Any) -> Any:
    """One turn of code with no framework callback: ``with groundtrace.turn(question) as t:`` (set
    ``t.answer``), or ``@groundtrace.turn`` / ``@groundtrace.turn(monitor=...)`` on the function that answers.

    Options: ``answer``, ``session_id``, ``metadata``, ``monitor`` (default: the process-wide Monitor),
    ``mask``, ``sample_rate``, ``name``."""
    if callable(question) and not isinstance(question, str):
        return TurnScope(**options)(question)
    return TurnScope(question, **options)


class ExplicitTurn(PendingRecord):
    """A :class:`TurnScope` that ended, built into its Record by the Monitor's worker."""

    __slots__ = ("scope",)

    def __init__(self, scope: TurnScope) -> None:
        self.id, self.run_id = scope.id, None
        self.trace_id = scope._ids[0] if scope._ids is not None else None
        self.metadata = EXCLUDED if scope.metadata.get("groundtrace_exclude") else NOT_EXCLUDED
        self.scope = scope

    def build(self) -> Record:
        scope = self.scope
        candidates = [c for c in (r.candidate() for r in scope.retrievals) if c is not None]
        chosen = choose(candidates, None)
        chars = None
        if chosen is None:
            contexts: list[str] = []
            metadata: dict[str, Any] = {"contexts_from": None}
            if unreadable := [r.no_text for r in scope.retrievals if r.no_text]:
                metadata[NO_TEXT] = "; ".join(unreadable)
        else:
            contexts = [p.text for p in chosen.selection.contexts]
            # a passage cut where it was read counts at its length then
            chars = sum(p.metadata.get(CUT_FROM, len(p.text)) for p in chosen.selection.contexts)
            metadata = {"contexts_from": chosen.origin, "documents": [item_origin(p) for p in chosen.selection.contexts]}
        metadata = {"source": "groundtrace.turn", "turn_name": scope.name, **scope.metadata, **metadata}
        queries = [r.query for r in scope.retrievals if r.query and r.query != scope.question]
        question, answer, contexts, cut = bounded(scope.question, scope.answer, contexts, chars)
        if chosen is not None and chosen.stopped is not None:  # reading stopped at a bound: the rest was not read
            cut = cut or {}
            total = sum(map(len, contexts))
            cut.setdefault("contexts", {"chars": chars or total, "kept": total, "passages": len(contexts),
                                        "kept_passages": len(contexts)})
            cut["contexts"].update(stopped=chosen.stopped, entries=chosen.entries)
        if cut is not None:
            metadata["truncated"] = cut
        return Record(id=scope.id, question=question, queries=list(dict.fromkeys(queries)) or None,
                      contexts=contexts, answer=answer, metadata=metadata,
                      trace_id=scope._ids[0] if scope._ids else None, span_id=scope._ids[1] if scope._ids else None,
                      trace_links=scope._links, session_id=scope.session_id)

