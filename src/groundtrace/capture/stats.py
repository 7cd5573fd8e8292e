"""Where every root went, in the one shape both integrations report (``stats()``), and why turns
made no Record, said once per reason at INFO level.

    roots == recorded + sum(no_record.values()) + failed + evicted + not_turns + in_flight

A root is what the integration follows as one turn (LangChain: a chain run with no parent it
sees; LlamaIndex: a span with no LlamaIndex span around it). It is, once: ``recorded`` (a Record
went to the Monitor, which samples and may drop it: see its own stats; ``excluded`` counts those
marked excluded among them), made no Record for a reason (``no_record``), ``failed`` (the root
raised), ``evicted`` (it never ended and was forgotten past the integration's bound on roots in
flight), ``not_turns`` (no one's turn: LlamaIndex's index building, bare embedding or LLM calls;
always 0 in LangChain, where those are not roots), or still ``in_flight``. ``callback_errors``
counts failures of the integration's own callbacks, which the application never sees.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from groundtrace.redaction import get_logger

log = get_logger("groundtrace.capture")

FAILED = "the root raised"
# a root whose end groundtrace failed to read: its own failure, never the application's
UNREADABLE = "groundtrace failed to read it"
UNREADABLE_HINT = "a failure of groundtrace's own, logged and counted in callback_errors"


@dataclass
class CaptureStats:
    """Where every root went (see the module's docstring for the sum they make)."""

    roots: int = 0
    recorded: int = 0  # a Record was submitted to the Monitor (which samples: see its stats)
    excluded: int = 0  # of the recorded, those marked excluded (metadata groundtrace_exclude)
    no_record: dict[str, int] = field(default_factory=dict)  # ended with no Record: count per reason
    failed: int = 0  # the root raised: nothing is scored
    evicted: int = 0  # never ended; forgotten past the bound on roots in flight
    not_turns: int = 0  # no one's turn (LlamaIndex: index building, bare embedding or LLM calls)
    callback_errors: int = 0  # a callback of ours failed (logged; the framework never sees it)
    in_flight: int = 0  # started, not ended yet

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def accounted(self) -> int:
        """The roots these counts account for: equal to ``roots`` at any moment."""
        return (self.recorded + sum(self.no_record.values()) + self.failed + self.evicted + self.not_turns
                + self.in_flight)


class NoRecordReasons:
    """Why turns made no Record, counted per reason, and said once per reason, so a user who wired the
    callback into an app it cannot read finds out without a log line per request: at WARNING when the
    turn called a model (an application that answered, and that groundtrace could not read: the line
    names the fix), else at INFO (index building, a chain that is not RAG)."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._said: set[tuple[str, bool]] = set()

    def count(self, reason: str, hint: str = "", warn: bool = False) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + 1
        self.say(reason, hint, warn)

    def say(self, reason: str, hint: str = "", warn: bool = False) -> None:
        """Say ``reason`` if it was not said yet at that level (a root that failed or was evicted is
        said so too, and counted apart from the reasons): ``warn`` for a turn that called a model."""
        with self._lock:
            if (reason, warn) in self._said:
                return
            self._said.add((reason, warn))
        log.log(logging.WARNING if warn else logging.INFO,
                "groundtrace: a %s turn made no record: %s%s (said once; counted in stats())",
                self.framework, reason, f"; {hint}" if hint else "")

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._said.clear()


class CaptureCounter:
    """The counts behind :class:`CaptureStats`, thread-safe; the integration says how many roots
    are in flight when it asks for a snapshot."""

    def __init__(self, framework: str) -> None:
        self._lock = threading.Lock()
        self._stats = CaptureStats()
        self.reasons = NoRecordReasons(framework)

    def root(self) -> None:
        with self._lock:  # once per request: no setattr by name
            self._stats.roots += 1

    def recorded(self, excluded: bool) -> None:
        with self._lock:
            self._stats.recorded += 1
            self._stats.excluded += excluded

    def no_record(self, reason: str, hint: str = "", warn: bool = False) -> None:
        self.reasons.count(reason, hint, warn)

    def unreadable(self) -> None:
        """groundtrace failed on a root's end: it makes no Record, for a reason of its own."""
        self.reasons.count(UNREADABLE, UNREADABLE_HINT)

    def failed(self, hint: str = "") -> None:
        self._add("failed")
        self.reasons.say(FAILED, hint)

    def evicted(self, times: int = 1, hint: str = "") -> None:
        self._add("evicted", times)
        self.reasons.say("the root never ended", hint)

    def not_turn(self) -> None:
        self._add("not_turns")

    def callback_error(self) -> None:
        self._add("callback_errors")

    def snapshot(self, in_flight: int) -> CaptureStats:
        with self._lock:
            stats = CaptureStats(**{**asdict(self._stats), "in_flight": in_flight})
        stats.no_record = self.reasons.counts()
        return stats

    def _add(self, name: str, times: int = 1) -> None:
        with self._lock:
            setattr(self._stats, name, getattr(self._stats, name) + times)
