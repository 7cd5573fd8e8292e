"""The tool calls of turns that have ended, by tool call id: which turn made each and whether it failed.

Part of the capture kit's definition of a turn (groundtrace.turn), honoured by every integration:
an agent's memory (a LlamaIndex Memory, a LangGraph checkpointed thread) hands a later turn's model
the tool messages of earlier turns. The turn that ran a call leaves it here at its end, so that a
later turn that keeps such a message's text as a context names the turn it came from (its
``metadata["documents"]``/``["nodes"]`` entry's ``"turn"``: that turn's Record id), and sets an
error aside where the message itself does not say the call failed (LlamaIndex keeps only the text
and the call id; the turn that ran it was told, by ``ToolOutput.is_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# far above the tool calls of the conversations one process keeps in memory at once
MAX_CALLS = 4096


@dataclass(frozen=True, slots=True)
class EarlierCall:
    turn: str  # the id of the turn's Record (LlamaIndex: its root span's id; LangChain: its root run's id)
    error: bool


class EarlierCalls:
    """Written on the application's thread at a turn's end (under the integration's lock: two turns
    may end at once), read by the Monitor's worker: a dict's get and set are atomic, so reads take no lock.

    What is kept is the call's output object as the tool returned it, and how to render it as text:
    rendering waits for a later turn that looks the call up (off the application's thread), and
    the text it renders then is compared with the text that turn read."""

    def __init__(self, limit: int = MAX_CALLS) -> None:
        self._limit = limit
        # call id -> (the output, its renderer, the call): the text tells a reused id apart
        # (a scripted model's "call-0", an id a provider repeats across conversations)
        self._calls: dict[str, tuple[Any, Callable[[Any], str | None], EarlierCall]] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def remember(self, call_id: str, output: Any, turn: str, error: bool,
                 render: Callable[[Any], str | None] = str) -> None:
        self._calls.pop(call_id, None)
        self._calls[call_id] = (output, render, EarlierCall(turn, error))
        while len(self._calls) > self._limit:
            del self._calls[next(iter(self._calls))]

    def find(self, call_id: str | None, text: str) -> EarlierCall | None:
        """The earlier call with this id whose output renders exactly as ``text``, if one is remembered."""
        found = self._calls.get(call_id) if call_id is not None else None
        if found is None:
            return None
        output, render, call = found
        return call if render(output) == text else None
