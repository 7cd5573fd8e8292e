"""The boundary: what LlamaIndex's dispatcher hands the handlers, read once into groundtrace's own form.

Span ids are strings (``"RetrieverQueryEngine.query-<uuid>"``) and tags a dict in every LlamaIndex
release; a dispatcher or a span handler of another library may hand other shapes. Past this module
the tracker sees only string span ids (or none) and a dict of tags. What cannot be read raises
:class:`UnreadableEvent`, and the run it belongs to makes no Record (tracker.py): a Record is never
built from part of a run's tree.
"""

from __future__ import annotations

from typing import Any

from groundtrace.capture.boundary import UnreadableEvent, string_keyed

_MAX_ID_CHARS = 400  # a span id longer than this is no id: never kept, never logged


def span_key(value: Any, what: str = "span id") -> str:
    if type(value) is str and value and len(value) <= _MAX_ID_CHARS:  # every LlamaIndex span
        return value
    if isinstance(value, str) and value and len(value) <= _MAX_ID_CHARS:
        return str(value)
    raise UnreadableEvent(f"{what} of type {type(value).__name__}" if not isinstance(value, str)
                          else f"{what} is an empty or overlong string")


def parent_key(value: Any) -> str | None:
    return None if value is None else span_key(value, "parent span id")


def tag_dict(value: Any) -> dict[str, Any] | None:
    """A span's tags as a dict with string keys; None when it has none (the instrument tags in force apply)."""
    if value is None:
        return None
    return value if type(value) is dict and all(type(key) is str for key in value) else string_keyed(value)
