"""groundtrace.session(session_id): the conversation of the turns run inside it, for apps that keep their own history.

The integrations read :func:`current_session` when a turn starts; a framework's own conversation id
(a LangGraph thread, a LlamaIndex Memory's session_id) wins over it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("groundtrace_session", default=None)


@contextmanager
def session(session_id: str) -> Iterator[None]:
    """Every turn started inside this block belongs to the conversation ``session_id``."""
    token = _current.set(session_id)
    try:
        yield
    finally:
        _current.reset(token)


def current_session() -> str | None:
    """The conversation set by the innermost :func:`session` block around this code, if any."""
    return _current.get()
