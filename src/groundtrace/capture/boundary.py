"""What both framework integrations read at their edge (their events.py): an event's arguments that cannot be read,
and a mapping read as far as it can be. Past that edge an integration sees only groundtrace's own forms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class UnreadableEvent(Exception):
    """An event's arguments that groundtrace cannot read: ``cause`` says which and why (never their value, which may
    quote the request's text)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def string_keyed(value: Any) -> dict[str, Any]:
    """A mapping as a plain dict of its string keys; anything that is no mapping (or fails to be read) gives none."""
    if type(value) is dict and all(type(key) is str for key in value):
        return dict(value)
    if isinstance(value, Mapping):
        try:
            return {key: item for key, item in value.items() if isinstance(key, str)}
        except Exception:
            return {}
    return {}
