"""CpuBudget: how much CPU groundtrace may take from the application, as a share of one core.

A token bucket of CPU seconds: ``share`` CPU seconds accrue per second of wall time, up to
``share * burst_s`` (a quiet spell buys at most ``burst_s`` seconds' worth of scoring at once).
What groundtrace's own threads and its scoring processes use is spent from it as it is measured,
after the fact, so the bucket may go into debt; while it is in debt the workers start no new batch,
and a batch holds what the bucket holds at the estimated CPU per record. Over any stretch of time
groundtrace's CPU is then at most ``share`` times its length, plus one burst, plus the batch that
was running when the debt began. The Monitor takes no new record (each is counted ``over_budget``)
while the bucket is in debt or while the records it holds would cost more than one burst: a record
is scored within about two bursts' time or not at all, never queued behind a backlog the budget
cannot pay.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class CpuBudget:
    """``share``: CPU seconds per second of wall time (0.25: a quarter of one core); ``clock``: a
    monotonic clock in seconds (a fake one in tests)."""

    def __init__(self, share: float, *, burst_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not (isinstance(share, (int, float)) and math.isfinite(share) and share > 0):
            raise ValueError(f"cpu_budget is a share of one core, a number above 0 (0.25: a quarter core), got {share!r}")
        if not burst_s > 0:
            raise ValueError(f"burst_s must be above 0, got {burst_s!r}")
        self.share = float(share)
        self.capacity = self.share * burst_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._at = clock()
        #: when the debt is paid; read without the lock on the application's path (one float)
        self._debt_until = -math.inf
        self._per_record: float | None = None
        #: how many records may wait: what one burst pays for (read without the lock by submit)
        self.backlog = 64
        self.spent = 0.0

    def _refill(self, now: float) -> None:
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.share)
        self._at = now

    def spend(self, cpu_s: float) -> None:
        """Take ``cpu_s`` CPU seconds, measured after they were used."""
        if cpu_s <= 0:
            return
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._tokens -= cpu_s
            self.spent += cpu_s
            self._debt_until = now - self._tokens / self.share if self._tokens < 0 else -math.inf

    def note_records(self, records: int, cpu_s: float) -> None:
        """What ``records`` records cost together: the estimate that sizes the next batch."""
        if records <= 0 or cpu_s < 0:
            return
        each = cpu_s / records
        with self._lock:
            self._per_record = each if self._per_record is None else 0.7 * self._per_record + 0.3 * each
            self.backlog = max(1, int(self.capacity / self._per_record)) if self._per_record > 0 else 1 << 30

    def in_debt(self) -> bool:
        """Whether more was spent than has accrued: the application's path asks this, so it is one read."""
        return self._clock() < self._debt_until

    def admits(self, waiting: int) -> bool:
        """Whether a new record may join the ``waiting`` ones: no debt, and no more waiting than one
        burst pays for (at most 64 before there is an estimate)."""
        return waiting < self.backlog and self._clock() >= self._debt_until

    def tokens(self) -> float:
        with self._lock:
            self._refill(self._clock())
            return self._tokens

    def wait_s(self) -> float:
        """Seconds until the debt is paid (0 when there is none)."""
        return max(0.0, self._debt_until - self._clock())

    def batch_limit(self, most: int) -> int:
        """How many records the next batch may hold (at least 1, at most ``most``): what the bucket
        holds now, at the estimated CPU per record; 1 until there is an estimate."""
        with self._lock:
            self._refill(self._clock())
            if self._per_record is None:
                return 1
            if self._per_record <= 0:
                return most
            return max(1, min(most, int(self._tokens / self._per_record)))
