"""``@groundtrace.retrieval``: mark what a function returns as the contexts of the turn it runs in.

The return value may be strings, LangChain Documents, LlamaIndex nodes, dicts with a text field,
``(item, score)`` pairs or a vector store's result with ``.nodes``; sync and async functions, generators and
async generators (what they yield, collected as it is read) alike. Where it goes, innermost first:

1. the framework turn it runs inside (a LangChain root run, a LlamaIndex root span), found through the
   framework's own context by the integration, which registered a finder here (:func:`register_finder`):
   the contexts are a retrieval of that turn, trusted as a retriever's;
2. the ``groundtrace.turn`` block or function around it (:mod:`groundtrace.capture.explicit`);
3. else it waits, in the caller's context, for the next model call that starts a turn there (a LangChain
   model called by hand, a LlamaIndex LLM's ``complete``/``chat``, a chain invoked after the retrieval):
   "retrieve, then call the model" is a turn. What waits is kept for :data:`PENDING_TTL_S` and a few calls
   (:data:`MAX_PENDING`), and taken once.

On the application's thread this only keeps a reference to the return value: it is read in the Monitor's
worker. Nothing here raises into the application: a failure of groundtrace's own is logged once and counted.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, overload

from groundtrace.capture.carried import Carried, value_candidate
from groundtrace.capture.stats import CaptureCounter
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.capture")

F = TypeVar("F", bound=Callable[..., Any])
# what waits for the next model call of its context: this long, at most this many retrievals
PENDING_TTL_S = 300.0
MAX_PENDING = 8
# argument names that hold the question or the query, after the first string argument
QUESTION_ARGUMENTS = ("question", "query", "input", "message", "q", "text", "prompt")
# the turns of code with no framework (groundtrace.turn) and the failures of this module, counted together
COUNTS = CaptureCounter("plain Python")
_said: set[Any] = set()
_said_lock = threading.Lock()
_taken_lock = threading.Lock()


class OpenTurn(Protocol):
    """A ``groundtrace.turn`` block in progress, as a retrieval made inside it sees it."""

    open: bool
    retrievals: list[Retrieved]
    framework_turns: int


# the innermost groundtrace.turn block around the caller (set by groundtrace.capture.explicit)
current_turn: contextvars.ContextVar[OpenTurn | None] = contextvars.ContextVar("groundtrace_turn", default=None)


@dataclass(eq=False, slots=True)
class Retrieved:
    """One call of a ``@groundtrace.retrieval`` function: its name, the query it was given and what it
    returned (kept as it was; read in the Monitor's worker)."""

    name: str
    query: str | None
    value: Any
    at: float = field(default_factory=time.monotonic)
    taken: bool = False  # by a turn that started after it (take_pending): never by a second one

    def candidate(self) -> Carried | None:
        """Its passages, as a carried candidate named after the function (a retrieval's documents: the
        :data:`~groundtrace.capture.carried.DOCUMENTS` tier whatever their type)."""
        found = value_candidate(self.value, f"@groundtrace.retrieval '{self.name}'")
        if found is not None and found.unreadable:
            say_once(("unreadable", self.name),
                      "groundtrace: @groundtrace.retrieval %r returned %d item(s) with no text (a string, a Document's "
                      "page_content, a node's get_content(), a dict's text field): they are not contexts",
                      self.name, found.unreadable)
        return None if found is None else Carried(found.origin, 0, found.passages, found.unreadable)


# ------------------------------------------------------------------------------------- finders
# An integration's finder: given a retrieval made now, file it under the framework turn the caller runs
# in and answer True, else False. Called on the application's thread: a context lookup, nothing more.
Finder = Callable[[Retrieved], bool]
_finders: dict[str, Finder] = {}


def register_finder(name: str, finder: Finder) -> None:
    """An integration's way to the framework turn a retrieval runs in (replaces one of the same name)."""
    _finders[name] = finder


def unregister_finder(name: str, finder: Finder | None = None) -> None:
    """Forget the finder of that name (only if it is ``finder``, when given: a newer one stays)."""
    if finder is None or _finders.get(name) == finder:
        _finders.pop(name, None)


# ------------------------------------------------------------------------------------ pending
# The retrievals made outside any turn, per context: a tuple set in the caller's own context (the decorator
# runs there), so an asyncio task's retrievals stay its own; one inherited by several tasks is taken once
# (each Retrieved knows whether it was taken).
PENDING: contextvars.ContextVar[tuple[Retrieved, ...]] = contextvars.ContextVar("groundtrace_pending", default=())


def _hold(retrieved: Retrieved) -> None:
    PENDING.set((*PENDING.get(), retrieved)[-MAX_PENDING:])


def has_pending() -> bool:
    """Whether retrievals made outside any turn wait in the caller's context (one ContextVar read)."""
    return bool(PENDING.get())


def take_pending() -> list[Retrieved]:
    """The retrievals waiting in the caller's context (made in the last :data:`PENDING_TTL_S`, not taken by
    another turn yet), taken: the model call starting now is their turn."""
    held = PENDING.get()
    if not held:
        return []
    PENDING.set(())
    oldest = time.monotonic() - PENDING_TTL_S
    found = []
    with _taken_lock:
        for retrieved in held:
            if not retrieved.taken and retrieved.at >= oldest:
                retrieved.taken = True
                found.append(retrieved)
    return found


# ------------------------------------------------------------------------------- the decorator
def query_of(function: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
    """The query a retrieval was given: its first string argument, else an argument named like one."""
    for name in QUESTION_ARGUMENTS:
        if isinstance(kwargs.get(name), str):
            return kwargs[name]
    for value in args:
        if isinstance(value, str):
            return value
    return None


def function_name(function: Callable[..., Any]) -> str:
    """What names a function in ``contexts_from``: its qualified name (``Store.search``), or its plain name when
    it is defined inside another function (no ``<locals>`` in what a user reads)."""
    qualified = str(getattr(function, "__qualname__", "") or "")
    return qualified if qualified and "<locals>" not in qualified else str(getattr(function, "__name__", "retrieval"))


def deliver(retrieved: Retrieved) -> None:
    """File a retrieval where it belongs (innermost first: a framework turn, a :func:`turn`, the caller's
    context for the next model call). Never raises."""
    try:
        for name, finder in list(_finders.items()):
            try:
                if finder(retrieved):
                    return
            except Exception:
                count_failure(f"the {name} finder")
        scope = current_turn.get()
        if scope is not None and scope.open:
            scope.retrievals.append(retrieved)
            return
        _hold(retrieved)
    except Exception:
        count_failure("@groundtrace.retrieval")


@overload
def retrieval(function: F) -> F: ...
@overload
def retrieval(function: None = None, *, name: str | None = None) -> Callable[[F], F]: ...


def retrieval(function: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Mark what ``function`` returns (or yields) as the contexts of the turn it runs in (see the module).

    ``@groundtrace.retrieval`` or ``@groundtrace.retrieval(name="pgvector")``; the function is called as it
    is and its value returned unchanged (a generator is passed through item by item)."""
    if function is None:
        return functools.partial(retrieval, name=name)
    label = name or function_name(function)

    if inspect.isasyncgenfunction(function):
        @functools.wraps(function)
        async def agen_wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            items: list[Any] = []
            async for item in function(*args, **kwargs):
                items.append(item)
                yield item
            deliver(Retrieved(label, query_of(function, args, kwargs), items))

        return agen_wrapper
    if inspect.isgeneratorfunction(function):
        @functools.wraps(function)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            items: list[Any] = []
            for item in function(*args, **kwargs):
                items.append(item)
                yield item
            deliver(Retrieved(label, query_of(function, args, kwargs), items))

        return gen_wrapper
    if inspect.iscoroutinefunction(function):
        @functools.wraps(function)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            value = await function(*args, **kwargs)
            deliver(Retrieved(label, query_of(function, args, kwargs), value))
            return value

        return async_wrapper

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        value = function(*args, **kwargs)
        deliver(Retrieved(label, query_of(function, args, kwargs), value))
        return value

    return wrapper


def say_once(key: Any, message: str, *args: Any) -> None:
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    log.warning(message, *args)


def count_failure(where: str) -> None:
    """A failure of groundtrace's own on the application's thread: counted, said once (the exception's type
    only: its message may hold the application's text), never raised."""
    try:
        COUNTS.callback_error()
        error = sys.exc_info()[1]
        say_once(("failure", where, type(error).__name__), "groundtrace: %s failed (%s); the application is not "
                 "affected, stats() counts it", where, type(error).__name__)
    except Exception:
        pass
