"""The tool calls of turns that have ended, by tool call id: which turn made each and whether it failed.

Part of the capture kit's definition of a turn (groundtrace.capture.turn), honoured by every integration:
an agent's memory (a LlamaIndex Memory, a LangGraph checkpointed thread) hands a later turn's model
the tool messages of earlier turns. The turn that ran a call leaves it here at its end, so that a
later turn that keeps such a message's text as a context names the turn it came from (its
``metadata["documents"]``/``["nodes"]`` entry's ``"turn"``: that turn's Record id), and sets an
error aside where the message itself does not say the call failed (LlamaIndex keeps only the text
and the call id; the turn that ran it was told, by ``ToolOutput.is_error``).
"""

from __future__ import annotations

from dataclasses import dataclass

# far above the tool calls of the conversations one process keeps in memory at once
MAX_CALLS = 4096


@dataclass(frozen=True, slots=True)
class EarlierCall:
    turn: str  # the id of the turn's Record (LlamaIndex: its root span's id; LangChain: its root run's id)
    error: bool


class EarlierCalls:
    """Written under the integration's lock (two turns may end at once) where it files an ended turn's
    calls (LlamaIndex: the application's thread at the turn's end; LangChain: the Monitor's worker,
    from the ended roots it queued), read by the Monitor's worker: a dict's get and set are atomic,
    so reads take no lock."""

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
