"""A circuit breaker for the backends that talk to something that can be down: a judge endpoint, a Hub model.

Closed, it lets every call through and counts the failures in a row. After ``failures`` in a row it
opens: for ``backoff_s`` every call is refused at once (:class:`CircuitOpen`), so the records queued
behind a judge that hangs or answers 500 get an error Score in microseconds instead of each paying the
timeout and the retries again. When the back-off is over it is half-open: one call (the probe) goes
through; its success closes the breaker, its failure opens it again for twice as long (up to
``max_backoff_s``). Opening is said once at WARNING, with the cause; closing again at WARNING too (the
metric works again); the refused calls are counted (:attr:`CircuitBreaker.refused`), never logged one by
one. Thread-safe; the clock is injectable for the tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from groundtrace.errors import GroundtraceError
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.backends")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class CircuitOpen(GroundtraceError, RuntimeError):
    """The call was refused without trying: the backend failed too often just now."""

    def __init__(self, name: str, remaining_s: float, cause: str) -> None:
        super().__init__(f"{name} is failing ({cause}): not asked again for {remaining_s:.0f} s "
                         "(circuit breaker open; the next call after that tries once)")
        self.remaining_s = remaining_s
        self.cause = cause


class CircuitBreaker:
    """``name`` says what fails in the lines logged (``the judge at http://...``)."""

    def __init__(self, name: str, *, failures: int = 5, backoff_s: float = 30.0, max_backoff_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if failures < 1 or backoff_s <= 0:
            raise ValueError("a circuit breaker needs failures >= 1 and backoff_s > 0")
        self.name = name
        self.failures = failures
        self.backoff_s = backoff_s
        self.max_backoff_s = max(max_backoff_s, backoff_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._in_a_row = 0
        self._state = CLOSED
        self._open_until = 0.0
        self._current_backoff = backoff_s
        self._probing = False
        self._cause = ""
        self.refused = 0  # calls refused while open (each became an error Score at once)
        self.opened = 0  # times it opened

    @property
    def state(self) -> str:
        with self._lock:
            if self._state == OPEN and self._clock() >= self._open_until:
                return HALF_OPEN
            return self._state

    def before(self) -> None:
        """Call before each attempt: raises :class:`CircuitOpen` while open (and while a probe is out)."""
        with self._lock:
            if self._state == CLOSED:
                return
            now = self._clock()
            if now >= self._open_until and not self._probing:
                self._probing = True  # this call is the probe
                return
            self.refused += 1
            raise CircuitOpen(self.name, max(0.0, self._open_until - now), self._cause)

    def succeeded(self) -> None:
        with self._lock:
            recovered = self._state != CLOSED
            self._state, self._in_a_row, self._probing = CLOSED, 0, False
            self._current_backoff = self.backoff_s
        if recovered:
            log.warning("groundtrace: %s answers again: circuit breaker closed", self.name)

    def failed(self, cause: str) -> None:
        """An attempt failed with a fault of the backend's (down, slow, 5xx, unreadable): not a refusal of
        one input, which says nothing about the next."""
        with self._lock:
            self._cause = cause
            if self._probing or self._state != CLOSED:  # the probe failed: open again, for longer
                self._current_backoff = min(self._current_backoff * 2, self.max_backoff_s)
                self._open(reopened=True)
                return
            self._in_a_row += 1
            if self._in_a_row < self.failures:
                return
            self._open(reopened=False)
        log.warning("groundtrace: %s failed %d times in a row (%s): its records get an error Score at once for "
                    "%.0f s, then one call tries it again (circuit breaker)", self.name, self.failures, cause,
                    self.backoff_s)

    def _open(self, reopened: bool) -> None:
        """(Lock held.)"""
        self._state, self._probing = OPEN, False
        self._open_until = self._clock() + self._current_backoff
        self.opened += 1
        if reopened:
            log.debug("groundtrace: %s still failing (%s): open for %.0f s", self.name, self._cause,
                      self._current_backoff)
