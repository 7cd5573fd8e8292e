"""One delivery lane per sink: a slow or failing sink cannot starve the others, nor the Monitor's worker.

Each sink the Monitor feeds in this process gets a :class:`Lane`: a bounded queue and a thread of its own
that calls its ``emit``. The worker hands each record's Scores to every lane and goes on. A lane that is
full (its sink is slower than the traffic) refuses the record, which counts as that sink's error; a sink
whose ``emit`` raises counts the same; both are said as a rate (one WARNING with the cause, then a summary
at most once a minute: :class:`groundtrace.redaction.RateLimitedWarning`), never a line per record. An
``emit`` still running after ``timeout_s`` is said once: Python cannot stop it, but the other lanes go on.
At close each lane gets what is left of the close's time; what it still holds then is counted as that
sink's errors and said, and nothing starts being emitted after close returns (an emit still running then
is counted with them: it may never return). So for every record and sink: it was delivered, or it is one ``sink_errors``: the
counts reconcile exactly.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from groundtrace.privacy import without_text
from groundtrace.record import Record
from groundtrace.redaction import RateLimitedWarning, get_logger
from groundtrace.score import Score
from groundtrace.sinks import sink_name

log = get_logger("groundtrace.sinks")

#: records a lane holds before it refuses more (its sink is that far behind)
LANE_SIZE = 1000
#: an emit running longer than this is said (once per lane)
EMIT_TIMEOUT_S = 30.0
#: the seconds a sink found stalled at close (its emit never returned) gets for its close() (otherwise 10 s)
STALLED_CLOSE_S = 2.0


class Lane:
    """The deliveries to one sink, in order, on a thread of their own. ``on_errors(n)`` is called with the
    number of records the sink failed or refused (from the lane's thread, or the caller's when it is full)."""

    def __init__(self, sink: Any, on_errors: Callable[[int], None], size: int = LANE_SIZE,
                 timeout_s: float = EMIT_TIMEOUT_S) -> None:
        self.sink, self.name, self.size, self.timeout_s = sink, sink_name(sink), size, timeout_s
        self._on_errors = on_errors
        self._items: deque[tuple[Record, list[Score]]] = deque()
        self._ready = threading.Condition()
        self._busy_since: float | None = None
        self._closed = False
        self._said_slow = False
        self._running_counted = False
        self.delivered = 0
        self.failures = RateLimitedWarning(log, f"sink {self.name} failed")
        self._thread = threading.Thread(target=self._run, name=f"groundtrace-sink-{self.name}", daemon=True)
        self._thread.start()

    def put(self, record: Record, scores: list[Score]) -> bool:
        """Queue one record's Scores; False (counted, said as a rate) when the lane is full or closed."""
        with self._ready:
            if not self._closed and len(self._items) < self.size:
                self._items.append((record, scores))
                self._ready.notify()
                return True
            why = "closed" if self._closed else f"{self.size} records wait for it already (it is slower than the traffic)"
        self.failures.failed(f"record {record.id} not delivered: {why}")
        self._on_errors(1)
        return False

    def pending(self) -> int:
        """Records queued or being emitted."""
        with self._ready:
            return len(self._items) + (self._busy_since is not None)

    def wait(self, deadline: float, stall_s: float | None = None) -> bool:
        """Wait until everything queued was emitted, or ``deadline`` (time.monotonic()); True when it was.
        With ``stall_s``, also stop once one emit has run that long without returning: nothing progresses.
        Says once if the emit in progress has run over ``timeout_s``."""
        while True:
            with self._ready:
                if not self._items and self._busy_since is None:
                    return True
                busy = self._busy_since
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.stalled(stall_s):
                    return False
                self._ready.wait(min(remaining, 0.1))
            if busy is not None and time.monotonic() - busy > self.timeout_s and not self._said_slow:
                self._said_slow = True
                log.warning("groundtrace: sink %s: one emit() has run for over %.0f s; the other sinks go on, and "
                            "what it has not delivered at close is counted in sink_errors", self.name, self.timeout_s)

    def stalled(self, stall_s: float | None) -> bool:
        """Has the emit in progress run ``stall_s`` without returning?"""
        busy = self._busy_since
        return stall_s is not None and busy is not None and time.monotonic() - busy > stall_s

    def close(self, deadline: float, stall_s: float | None = None) -> int:
        """Deliver what is queued until ``deadline`` (or until an emit has stalled ``stall_s``), then stop: what is
        left is counted (returned) and said; nothing is emitted after this returns."""
        self.wait(deadline, stall_s)
        with self._ready:
            self._closed = True
            left, running = len(self._items), self._busy_since is not None
            self._items.clear()
            # an emit still running may never return (a server that never answers): it is not delivered as far as
            # this close knows, and counted now, once (its return, if it comes, counts nothing more)
            self._running_counted = running
            self._ready.notify_all()
        self.failures.settle()
        lost = left + running
        if lost:
            log.warning("groundtrace: sink %s: %d record(s) not delivered when the Monitor closed (it is behind%s): "
                        "counted in sink_errors", self.name, lost,
                        "; one emit() was still running" if running else "")
            self._on_errors(lost)
        return lost

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._items and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
                record, scores = self._items.popleft()
                self._busy_since = time.monotonic()
            failed = False
            try:
                self.sink.emit(record, scores)
            except Exception as error:
                failed = True
                self.failures.failed(f"record {record.id}: {type(error).__name__}: {error}")
            with self._ready:  # counted before anyone waiting sees the lane idle (the lane's lock, then the Monitor's)
                self._busy_since = None
                if self._running_counted:  # the emit that ran over close(): counted there already
                    return
                if failed:
                    self._on_errors(1)
                else:
                    self.delivered += 1
                self._ready.notify_all()
                if self._closed:
                    return


class Lanes:
    """The lanes of a Monitor's own sinks, made on first use."""

    def __init__(self, on_errors: Callable[[int], None], capture_text: bool = True) -> None:
        self._on_errors = on_errors
        self.capture_text = capture_text
        self._lanes: dict[int, Lane] = {}
        self._lock = threading.Lock()

    def _lane(self, sink: Any) -> Lane:
        lane = self._lanes.get(id(sink))
        if lane is None:
            with self._lock:
                lane = self._lanes.get(id(sink))
                if lane is None:
                    lane = self._lanes[id(sink)] = Lane(sink, self._on_errors)
        return lane

    def deliver(self, sinks: Sequence[Any], record: Record, scores: list[Score], *, capture_text: bool = True) -> None:
        """Hand one record's Scores to each sink's lane (text taken out first when ``capture_text`` is off)."""
        if not sinks:
            return
        if not capture_text:
            record, scores = without_text(record, scores)
        for sink in sinks:
            self._lane(sink).put(record, scores)

    def pending(self) -> int:
        return sum(lane.pending() for lane in list(self._lanes.values()))

    def wait(self, timeout: float | None, stall_s: float | None = None) -> bool:
        deadline = time.monotonic() + (1e9 if timeout is None else timeout)
        return all([lane.wait(deadline, stall_s) for lane in list(self._lanes.values())])

    def stalled(self, stall_s: float | None) -> list[str]:
        """The sinks whose emit in progress has run ``stall_s`` without returning."""
        return [lane.name for lane in list(self._lanes.values()) if lane.stalled(stall_s)]

    def say_stalled(self, stall_s: float | None, waited: float, timeout: float | None) -> list[str]:
        """The sinks stalled (see :meth:`stalled`), said at WARNING where there are any."""
        stalled = self.stalled(stall_s)
        if stalled:
            log.warning("groundtrace: at exit: sink(s) %s made no progress for %.0f s (an emit() that does not "
                        "return): stopped waiting for them, %.1f s into the %.0f s the exit allows", ", ".join(stalled),
                        stall_s, waited, timeout or 0.0)
        return stalled

    def close(self, timeout: float, stall_s: float | None = None) -> int:
        """Close every lane within ``timeout`` in all; the records left undelivered (counted as sink errors)."""
        deadline = time.monotonic() + max(0.0, timeout)
        return sum(lane.close(deadline, stall_s) for lane in list(self._lanes.values()))
