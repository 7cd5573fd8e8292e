"""The conversation a turn belongs to, for applications that keep their own chat history.

``with groundtrace.session("chat-42"): chain.invoke(...)`` names the conversation of every turn that
starts inside the block; the integrations read :func:`current_session` when a root run starts (a
framework's own id, LangGraph's thread_id say, wins over it). A ContextVar, so the value follows the
code that runs under it: nested blocks restore the outer id, asyncio tasks copy it when created, and
a thread started with ``contextvars.copy_context().run`` sees it; a bare thread does not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("groundtrace_session", default=None)


@contextmanager
def session(session_id: str) -> Iterator[str]:
    """Name the conversation of the turns run inside the block; yields the id as a string."""
    value = str(session_id)  # a numbered chat (an int, a UUID) is still an id
    if not value:
        raise ValueError("a session id must not be empty")
    token = _current.set(value)
    try:
        yield value
    finally:
        _current.reset(token)


def current_session() -> str | None:
    """The id of the innermost :func:`session` block around the caller, or None outside any."""
    return _current.get()


__all__ = ["current_session", "session"]
