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
   "retrieve, then call the model" is a turn. It belongs to its own request: the model call must be given its
   passages (its prompt or inputs hold one of them: contexts are what reached the model), under the same
   OpenTelemetry trace when one is current, within :data:`PENDING_TTL_S`; a request scope
   (:mod:`groundtrace.capture.request`: the ASGI and WSGI middleware) drops what is left when the request
   ends, so nothing outlives it on a pooled thread. A few are kept (:data:`MAX_PENDING`), each taken once.

On the application's thread the passages are read out of the return value as it returns (to the Record's bounds:
at most MAX_PASSAGES entries and MAX_CONTEXT_CHARS of text, whatever its size; the texts are what the model was
given then, whatever the application does with its objects afterwards). Nothing here raises into the application:
a failure of groundtrace's own (a result that cannot be read) is logged once and counted, and its turn says so.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, overload

from groundtrace.capture.carried import Carried, no_text_reason, type_name, value_candidate
from groundtrace.capture.generators import Watch, wrap_async_generator, wrap_generator
from groundtrace.capture.stats import CaptureCounter
from groundtrace.redaction import get_logger
from groundtrace.trace_context import otel_ids

log = get_logger("groundtrace.capture")

F = TypeVar("F", bound=Callable[..., Any])
# what waits for the next model call of its context: this long, at most this many retrievals
PENDING_TTL_S = 60.0
MAX_PENDING = 8
# a passage reached the model when it is in the prompt (spaces and case folded): whole, or this much of its start
REACHED_CHARS = 400
# the most of a model call's input read for that (its text, in the order given)
PROMPT_READ_CHARS = 1 << 21
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
    """One call of a ``@groundtrace.retrieval`` function: its name, the query it was given and its passages,
    read out of what it returned when it returned (texts copied then: an application that refills the same
    list for the next request changes nothing here)."""

    name: str
    query: str | None
    value: Any  # what the function returned; read at once, then let go
    at: float = field(default_factory=time.monotonic)
    taken: bool = False  # by a turn that started after it (take_pending): never by a second one
    found: Carried | None = field(init=False, default=None)
    trace: str | None = field(init=False, default=None)  # the OpenTelemetry trace current when it returned
    no_text: str | None = field(init=False, default=None)  # why what it returned held no passage (not merely empty)

    def __post_init__(self) -> None:
        value, self.value = self.value, None
        ids = otel_ids()
        self.trace = ids[0] if ids is not None else None
        try:
            found = value_candidate(value, f"@groundtrace.retrieval '{self.name}'")
            why = no_text_reason(value) if found is None else None
        except Exception as error:  # a result whose len(), keys or items raise: its turn's Record says so
            count_failure(f"@groundtrace.retrieval {self.name!r} (reading what it returned)")
            self.no_text = (f"@groundtrace.retrieval {self.name!r} returned a {type_name(value)} that could not be "
                            f"read ({type(error).__name__})")
            return
        if found is not None and found.unreadable:
            say_once(("unreadable", self.name),
                     "groundtrace: @groundtrace.retrieval %r returned %d item(s) with no text (a string, a Document's "
                     "page_content, a node's get_content(), a dict's text field): they are not contexts",
                     self.name, found.unreadable)
        if found is None and why is not None:
            # no verdict from nothing: the turn's Scores are errors that say this, never "hallucinated"
            self.no_text = f"@groundtrace.retrieval {self.name!r} {why}"
            say_once(("no text", self.name, why), "groundtrace: %s: no passage in it has text (a string, a Document's "
                     "page_content, a node's get_content(), a dict's text field); its turn's Scores are errors that say so",
                     self.no_text)
        self.found = None if found is None else replace(found, tier=0)

    def candidate(self) -> Carried | None:
        """Its passages, as a carried candidate named after the function (a retrieval's documents: the
        :data:`~groundtrace.capture.carried.DOCUMENTS` tier whatever their type)."""
        return self.found

    def reached(self, prompt: str) -> bool:
        """Whether a model's input (folded by :func:`folded`) holds one of its passages: whole, or its first
        :data:`REACHED_CHARS` characters where a template cut a long one (never a passage's end alone: passages
        of one corpus often end alike)."""
        for passage in self.found.passages if self.found is not None else ():
            if folded(passage.text)[:REACHED_CHARS] in prompt:
                return True
        return False


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


def take_pending(model_input: Any = None) -> list[Retrieved]:
    """The retrievals waiting in the caller's context that are this model call's, taken: made in the last
    :data:`PENDING_TTL_S`, not taken by another turn yet, under the same OpenTelemetry trace when both know
    one, and (given ``model_input``: the call's messages, prompts or a chain's inputs) whose passages reached
    it. Those of another trace or too old are dropped; those its input does not hold wait for another call."""
    held = PENDING.get()
    if not held:
        return []
    ids = otel_ids()
    trace = ids[0] if ids is not None else None
    prompt = None if model_input is None else folded(held_text(model_input))
    oldest = time.monotonic() - PENDING_TTL_S
    found, waiting = [], []
    with _taken_lock:
        for retrieved in held:
            if retrieved.taken or retrieved.at < oldest or (trace and retrieved.trace and retrieved.trace != trace):
                continue
            if prompt is not None and not retrieved.reached(prompt):
                waiting.append(retrieved)
                continue
            retrieved.taken = True
            found.append(retrieved)
    PENDING.set(tuple(waiting))
    if waiting and not found:
        say_once(("not reached",), "groundtrace: a model call was given none of the passages that @groundtrace.retrieval "
                 "returned before it in the same request (%s): it is not their turn (contexts are what reached the "
                 "model). Said once.", ", ".join(sorted({r.name for r in waiting})))
    return found


def drop_pending() -> int:
    """Forget the retrievals waiting in the caller's context (a request ended: none outlives it); how many."""
    held = PENDING.get()
    if held:
        PENDING.set(())
    return sum(not r.taken for r in held)


def folded(text: str) -> str:
    """Text as a passage is looked for in a prompt: white space folded to single spaces, case folded."""
    return " ".join(text.split()).casefold()


def held_text(value: Any, limit: int = PROMPT_READ_CHARS) -> str:
    """The text a model call's input holds (strings, messages' ``content``, Documents' ``page_content``, nodes'
    text, in lists, tuples and mappings), joined, at most ``limit`` characters. Never raises."""
    parts: list[str] = []
    size = 0
    stack = [value]
    seen = 0
    while stack and size < limit and seen < 100_000:
        seen += 1
        item = stack.pop()
        try:
            if isinstance(item, str):
                parts.append(item)
                size += len(item)
            elif isinstance(item, Mapping):
                stack.extend(reversed(list(item.values())))
            elif isinstance(item, (list, tuple)):
                stack.extend(reversed(item))
            else:
                for attribute in ("content", "page_content", "text"):
                    found = getattr(item, attribute, None)
                    if isinstance(found, (str, list, tuple)):
                        stack.append(found)
                        break
                else:
                    node = getattr(item, "node", None)
                    if node is not None:
                        stack.append(node)
        except Exception:
            continue
    return "\n".join(parts)[:limit]


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
        return wrap_async_generator(function, _Collected(label, function))
    if inspect.isgeneratorfunction(function):
        return wrap_generator(function, _Collected(label, function))
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


class _Collected(Watch[tuple[list[Any], str | None]]):
    """A retrieval generator: what it yields, as it is read, delivered when it ends or is closed early (what
    was read is what the application used); nothing when it raised."""

    def __init__(self, label: str, function: Callable[..., Any]) -> None:
        self.label, self.function = label, function

    def begin(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[tuple[list[Any], str | None], None]:
        return ([], query_of(self.function, args, kwargs)), None

    def seen(self, state: tuple[list[Any], str | None], item: Any) -> None:
        state[0].append(item)

    def end(self, state: tuple[list[Any], str | None], error: BaseException | None, closed: bool) -> None:
        if error is None:
            deliver(Retrieved(self.label, state[1], state[0]))


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
