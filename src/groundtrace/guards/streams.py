"""A streamed answer guarded sentence by sentence: each sentence is checked as soon as it ends and sent only once
it is checked, so no unsupported sentence reaches the caller and at most one sentence is held back (``flag``
streams untouched and decides at the end). The whole answer is scored once more off the request's path, for staging.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from groundtrace.guards.decision import Action, Decision
from groundtrace.guards.guard import Guard, off_loop  # guard.py imports this module only when it streams
from groundtrace.record import Record
from groundtrace.score import Score, Span
from groundtrace.text.sentences import split_sentences


class SentenceGate:
    """The guard of one streamed answer, for any loop: ``feed(chunk)`` gives back the pieces that may be sent now,
    ``finish()`` the rest once the model is done; ``stopped`` says the fallback ended the answer (read no more) and
    ``decision`` is set by then. An integration whose stream carries other events interleaves them itself."""

    def __init__(self, guard: Guard, record: Record | Callable[[], Record], deliver: bool = True) -> None:
        self.guard = guard
        self._sentences = _SentenceChecks(guard, record, deliver)
        self._buffer = ""
        self._chunks: list[str] = []  # under flag: the answer, checked whole at the end
        self.decision: Decision | None = None
        self.held_back = 0  # the most characters held back at any time (at most one sentence and what follows it)

    @property
    def stopped(self) -> bool:
        return self._sentences.stopped

    def feed(self, chunk: str) -> list[str]:
        """The pieces that may be sent now that ``chunk`` came (a sentence it ended, checked; or nothing yet)."""
        if self.guard.policy == "flag":
            self._chunks.append(chunk)
            return [chunk]
        if self.stopped:
            return []
        self._buffer += chunk
        self.held_back = max(self.held_back, len(self._buffer))
        pieces = []
        sentence, self._buffer = _first_sentence(self._buffer)
        while sentence is not None:
            pieces.append(self._sentences.checked(sentence))
            if self.stopped:
                self._buffer = ""
                self.decision = self._sentences.decision()
                break
            sentence, self._buffer = _first_sentence(self._buffer)
        return [piece for piece in pieces if piece]

    def finish(self) -> list[str]:
        """The model is done: the last sentence, checked; ``decision`` is set."""
        if self.decision is not None:
            return []
        if self.guard.policy == "flag":
            self.decision = self.guard.check_record(self._sentences.record("".join(self._chunks)))
            return []
        piece = self._sentences.checked(self._buffer) if self._buffer else ""
        self._buffer = ""
        self.decision = self._sentences.decision()
        return [piece] if piece else []


class _Gated:
    """A stream read through a SentenceGate: what it decided, and the most it held back."""

    def __init__(self, guard: Guard, record: Record | Callable[[], Record], chunks: Any) -> None:
        self._gate = SentenceGate(guard, record)
        self._chunks = chunks

    @property
    def decision(self) -> Decision | None:
        return self._gate.decision

    @property
    def held_back(self) -> int:
        return self._gate.held_back


class GuardedStream(_Gated):
    """Iterate it for the pieces to send; ``decision`` is set when it is exhausted."""

    _chunks: Iterable[str]

    def __iter__(self) -> Iterator[str]:
        gate = self._gate
        for chunk in self._chunks:
            yield from gate.feed(chunk)
            if gate.stopped:
                close = getattr(self._chunks, "close", None)
                if callable(close):  # the model's stream is closed, not read to its end
                    close()
                return
        yield from gate.finish()


class AsyncGuardedStream(_Gated):
    """GuardedStream for async chunks: ``async for piece in guard.astream(...)``; checks run off the event loop."""

    _chunks: AsyncIterable[str]

    async def __aiter__(self) -> AsyncIterator[str]:
        gate = self._gate
        async for chunk in self._chunks:
            # a check may run on any chunk (the one that begins the next sentence): off the loop, but flag's never does
            pieces = gate.feed(chunk) if gate.guard.policy == "flag" else await off_loop(gate.feed, chunk)
            for piece in pieces:
                yield piece
            if gate.stopped:
                close = getattr(self._chunks, "aclose", None)
                if callable(close):
                    await close()
                return
        for piece in await off_loop(gate.finish):
            yield piece


class _SentenceChecks:
    """A streamed answer's sentences, each checked as it ends; what to send for each, and the decision."""

    def __init__(self, guard: Guard, record: Record | Callable[[], Record], deliver: bool) -> None:
        self.guard, self.deliver = guard, deliver
        self._source: Callable[[], Record] = record if callable(record) else lambda: record
        self.started = time.perf_counter()
        self.answer, self.sent = "", ""
        self.spans: list[Span] = []
        self.scores: list[Score] = []
        self.actions: list[Action] = []
        self.verdicts: list[bool | None] = []
        self.stopped = False
        self.waited = 0.0

    def checked(self, sentence: str) -> str:
        offset, self.answer = len(self.answer), self.answer + sentence
        began = time.perf_counter()
        record = self.record(sentence)
        scores, _ = self.guard._scores(record, self.guard.budget_ms)
        # in a stream what was sent cannot be asked for again (an unsupported sentence is replaced instead), and
        # redacting a sentence is leaving it out
        decision = self.guard._decide(record, scores, began,
                                      policy={"reask": "replace", "redact": "flag"}.get(self.guard.policy))
        self.waited += time.perf_counter() - began
        self.scores += decision.scores
        self.spans += [span.model_copy(update={"start": span.start + offset, "end": span.end + offset})
                       for span in decision.spans]
        action: Action = "redacted" if self.guard.policy == "redact" and decision.hallucinated else decision.action
        self.actions.append(action)
        self.verdicts.append(decision.hallucinated)
        if action in ("passed", "unchecked", "flagged"):
            piece = sentence
        elif action == "redacted":
            piece = ""
        else:  # replaced: the fallback ends the answer
            piece = ("" if not self.sent or self.sent[-1:].isspace() else " ") + decision.text
            self.stopped = True
        self.sent += piece
        return piece

    def record(self, answer: str) -> Record:
        """The Record of ``answer`` with the passages known now (an integration's capture may still be adding)."""
        return self._source().model_copy(update={"answer": answer})

    def decision(self) -> Decision:
        hallucinated = True if True in self.verdicts else None if None in self.verdicts else False
        action: Action = "replaced" if "replaced" in self.actions else "redacted" if "redacted" in self.actions else \
            "unchecked" if "unchecked" in self.actions else "passed"
        decision = Decision(action, hallucinated, self.sent, self.scores, self.spans, self.waited,
                            f"{len(self.actions)} sentence(s) checked: " + ", ".join(self.actions), self.answer)
        if self.deliver:
            self.guard.deliver_streamed(self.record(self.answer), decision)
        return self.guard._done(decision)


def _first_sentence(buffer: str) -> tuple[str | None, str]:
    """The first sentence of ``buffer`` with the blanks after it, once another sentence has begun after it."""
    sentences = split_sentences(buffer)
    if len(sentences) < 2:
        return None, buffer
    return buffer[: sentences[1].start], buffer[sentences[1].start:]
