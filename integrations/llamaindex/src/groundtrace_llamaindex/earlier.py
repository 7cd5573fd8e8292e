"""The tool calls of turns that have ended, by tool call id: which turn made each and whether it failed.

An agent's memory hands a later turn's model the tool messages of earlier turns, with nothing on
them that says a call failed (LlamaIndex keeps only the text and the call id). The turn that ran
the call was told (``ToolOutput.is_error``); it leaves that here, so that a later turn that reads
the message sets an error aside, and names the turn an output it keeps as a context came from.
"""

from __future__ import annotations

from dataclasses import dataclass

# far above the tool calls of the conversations one process keeps in memory at once
MAX_CALLS = 4096


@dataclass(frozen=True, slots=True)
class EarlierCall:
    turn: str  # the id of the turn's Record (its root span's id)
    error: bool


class EarlierCalls:
    """Written on the application's thread at a turn's end (under the tracker's lock), read by the
    Monitor's worker: a dict's get and set are atomic, so reads take no lock."""

    def __init__(self, limit: int = MAX_CALLS) -> None:
        self._limit = limit
        # call id -> (hash of the output's text, the call): the hash tells a reused id apart
        # (a scripted model's "call-0", an id a provider repeats across conversations)
        self._calls: dict[str, tuple[int, EarlierCall]] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def remember(self, call_id: str, text: str, turn: str, error: bool) -> None:
        self._calls.pop(call_id, None)
        self._calls[call_id] = (hash(text), EarlierCall(turn, error))
        while len(self._calls) > self._limit:
            del self._calls[next(iter(self._calls))]

    def find(self, call_id: str | None, text: str) -> EarlierCall | None:
        """The earlier call with this id whose output was exactly ``text``, if one is remembered."""
        found = self._calls.get(call_id) if call_id is not None else None
        return found[1] if found is not None and found[0] == hash(text) else None
