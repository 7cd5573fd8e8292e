"""The boundary: what LangChain hands a callback, read once into groundtrace's own form.

LangChain types its run ids as UUIDs, but a caller may set ``config["run_id"]`` to anything and
LangChain passes it on as it came: LangServe's routes give a ``str``, other servers an ``int``. Past
this module the handler and the collector see only a :data:`RunKey` (an ``int`` for every id that is
a UUID, in whatever form it came; a non-UUID string or an int as itself), plain tags and plain metadata.
An id that cannot be read at all raises :class:`UnreadableEvent`, and the run it belongs to makes no
Record (handler.py): a Record is never built from part of a run's tree.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from groundtrace.capture.boundary import UnreadableEvent, string_keyed

#: a run's key in the collector: a UUID's int, or a run id that is no UUID as it came (a string, an int)
RunKey = int | str

_MAX_ID_CHARS = 200  # a run id longer than this is no id: never kept, never logged


def run_key(value: Any, what: str = "run_id") -> RunKey:
    """The key of a run id in any form a caller may give: a UUID (or an object with a UUID's ``int``),
    its string in any of the forms ``UUID()`` reads, a plain string, or an int."""
    kind = type(value)
    if kind is UUID:  # LangChain's own ids: every event of an ordinary run
        return value.int
    if kind is str:
        return _text_key(value, what)
    if kind is int:
        return value
    if isinstance(value, UUID):
        return value.int
    if isinstance(value, str):
        return _text_key(str(value), what)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    number = getattr(value, "int", None)  # a UUID of another library (uuid_utils, say)
    if type(number) is int and 0 <= number < 1 << 128:
        return number
    raise UnreadableEvent(f"{what} of type {kind.__name__}")


def parent_key(value: Any) -> RunKey | None:
    """A parent run id's key; None when the run has no parent."""
    return None if value is None else run_key(value, "parent_run_id")


def run_text(value: Any) -> str:
    """A run id as a Record carries it: a UUID's canonical form, whatever form it came in; else as given."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(UUID(value))
        except ValueError:
            return value
    if isinstance(value, int):
        return str(value)
    return key_text(run_key(value))  # another library's UUID (run_key has checked its int)


def key_text(key: RunKey) -> str:
    """A key as text: a UUID's for an int a UUID can hold (every id LangChain makes), else as it is."""
    return str(UUID(int=key)) if type(key) is int and 0 <= key < 1 << 128 else str(key)


def _text_key(text: str, what: str) -> RunKey:
    if not text or len(text) > _MAX_ID_CHARS:
        raise UnreadableEvent(f"{what} is an empty or overlong string")
    try:
        return UUID(text).int
    except ValueError:
        return text


def run_name(value: Any) -> str | None:
    """A run's name, if it is a string."""
    return value if isinstance(value, str) and value else None


def tag_list(value: Any) -> list[str]:
    """A run's tags as a list of strings: a single string is one tag; what is not a string is left out."""
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [tag for tag in value if isinstance(tag, str)]
    return []


def metadata_dict(value: Any) -> dict[str, Any]:
    """A run's metadata as a plain dict with string keys; anything that is no mapping gives none."""
    return string_keyed(value) if value else {}
