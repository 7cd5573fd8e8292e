"""Monitor: score records in the background of a live application, and never get in its way.

``submit`` is O(1), never blocks and never raises: sampling decides, then a bounded queue takes the
record or counts a drop. Worker threads run the metrics (each under a timeout) and hand the Scores
to every sink. Every submitted record ends in exactly one bucket: sampled out, excluded, dropped,
scored or failed, and the counters add up.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass
from typing import Any

from groundtrace.engine import build_metrics
from groundtrace.metrics import Metric
from groundtrace.record import Record
from groundtrace.score import Score

log = logging.getLogger("groundtrace.monitor")

# Metadata keys that keep a record out of scoring (set per call, e.g. in a chain's run metadata).
EXCLUDE_KEYS = ("groundtrace_exclude", "groundtrace.exclude")
_STOP = object()


def sampled(key: str, rate: float) -> bool:
    """Deterministic sampling: the same key (a trace id) is always in or always out."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < rate


@dataclass
class MonitorStats:
    submitted: int = 0
    sampled_out: int = 0
    excluded: int = 0
    dropped: int = 0
    scored: int = 0
    failed: int = 0
    sink_errors: int = 0
    queued: int = 0
    latency_ms_p50: float | None = None
    latency_ms_p95: float | None = None

    @property
    def settled(self) -> int:
        return self.sampled_out + self.excluded + self.dropped + self.scored + self.failed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Monitor:
    """Background scoring for live traffic.

    ``metrics``: names or instances (default: lexical and facts). ``sinks``: objects with
    ``emit(record, scores)`` (see groundtrace.sinks), or names. ``sample_rate`` in [0, 1] decides
    per trace. ``queue_size`` bounds memory; beyond it records are dropped and counted.
    ``metric_timeout_s`` bounds each metric on each record: a metric that hangs yields an error
    Score and its thread is abandoned (Python cannot kill a thread), so at most
    ``workers * len(metrics)`` hung calls can pile up before new ones fail fast.
    """

    def __init__(
        self,
        metrics: Sequence[str | Metric] | str | None = None,
        sinks: Sequence[Any] | str | None = None,
        *,
        sample_rate: float = 1.0,
        queue_size: int = 1000,
        workers: int = 1,
        metric_timeout_s: float = 30.0,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        flush_at_exit: bool = True,
    ) -> None:
        from groundtrace.sinks import build_sinks

        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError(f"sample_rate must lie in [0, 1], got {sample_rate}")
        self.metrics = build_metrics(metrics, options)
        self.sinks = build_sinks(sinks)
        self.sample_rate = sample_rate
        self.metric_timeout_s = metric_timeout_s
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._stats = MonitorStats()
        self._latencies: deque[float] = deque(maxlen=2048)
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._closed = False
        slots = max(1, workers) * max(1, len(self.metrics)) * 2
        self._metric_pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="groundtrace-metric")
        self._workers = [
            threading.Thread(target=self._work, name=f"groundtrace-worker-{i}", daemon=True) for i in range(max(1, workers))
        ]
        for worker in self._workers:
            worker.start()
        if flush_at_exit:
            _register_exit_flush(self)

    # ------------------------------------------------------------------------------ the hot path
    def submit(self, record: Record) -> bool:
        """Offer a record for scoring; True if it was queued. Never blocks, never raises."""
        try:
            with self._lock:
                self._stats.submitted += 1
                if self._closed:
                    self._stats.dropped += 1
                    return False
            if any(record.metadata.get(key) for key in EXCLUDE_KEYS):
                self._count("excluded")
                return False
            key = record.trace_id or record.run_id or record.id or str(id(record))
            if not sampled(key, self.sample_rate):
                self._count("sampled_out")
                return False
            with self._lock:
                self._in_flight += 1
            try:
                self._queue.put_nowait(record)
            except queue.Full:
                with self._lock:
                    self._in_flight -= 1
                    self._stats.dropped += 1
                    self._idle.notify_all()
                return False
            return True
        except Exception:  # the application must never see our failure
            log.exception("groundtrace: submit failed")
            self._count("dropped")
            return False

    def _count(self, bucket: str) -> None:
        with self._lock:
            setattr(self._stats, bucket, getattr(self._stats, bucket) + 1)

    # --------------------------------------------------------------------------------- workers
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            started = time.perf_counter()
            failed = True
            try:
                scores = [self._score(metric, item) for metric in self.metrics]
                failed = any(not s.ok for s in scores)
                self._emit(item, scores)
            except Exception:
                log.exception("groundtrace: scoring record %s failed", getattr(item, "id", None))
            finally:
                with self._lock:
                    self._stats.failed += failed
                    self._stats.scored += not failed
                    self._latencies.append((time.perf_counter() - started) * 1000.0)
                    self._in_flight -= 1
                    self._idle.notify_all()

    def _score(self, metric: Metric, record: Record) -> Score:
        try:
            future = self._metric_pool.submit(metric.score, record)
        except RuntimeError as error:  # the pool is shut down: closing
            return metric.error(f"not scored: {error}", record.id)
        try:
            return future.result(timeout=self.metric_timeout_s)
        except FutureTimeout:
            future.cancel()
            log.warning("groundtrace: metric %s timed out on record %s", metric.name, record.id)
            return metric.error(f"timed out after {self.metric_timeout_s:g} s (metric_timeout_s)", record.id)
        except Exception as error:  # metric.score does not raise; this is belt and braces
            return metric.error(f"{type(error).__name__}: {error}", record.id)

    def _emit(self, record: Record, scores: list[Score]) -> None:
        for sink in self.sinks:
            try:
                sink.emit(record, scores)
            except Exception as error:
                self._count("sink_errors")
                log.warning("groundtrace: sink %s failed for record %s: %s", getattr(sink, "name", sink), record.id, error)

    # ------------------------------------------------------------------------------- lifecycle
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued record is settled; False if ``timeout`` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._in_flight:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        for sink in self.sinks:
            try:
                sink.flush()
            except Exception as error:
                log.warning("groundtrace: flushing sink %s failed: %s", getattr(sink, "name", sink), error)
        return True

    def close(self, timeout: float | None = 10.0) -> None:
        """Flush, then stop the workers and the sinks. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.flush(timeout)
        self._drop_queued()
        for _ in self._workers:
            try:
                self._queue.put(_STOP, timeout=1.0)
            except queue.Full:
                pass
        for worker in self._workers:
            worker.join(timeout=1.0)
        self._metric_pool.shutdown(wait=False, cancel_futures=True)
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as error:
                log.warning("groundtrace: closing sink %s failed: %s", getattr(sink, "name", sink), error)
        log.info("groundtrace: monitor closed: %s", self.stats.as_dict())

    def _drop_queued(self) -> None:
        """Records still waiting when close() gives up are dropped, and counted as such."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is _STOP:
                continue
            with self._lock:
                self._stats.dropped += 1
                self._in_flight -= 1
                self._idle.notify_all()

    @property
    def stats(self) -> MonitorStats:
        with self._lock:
            stats = MonitorStats(**{k: v for k, v in asdict(self._stats).items()})
            latencies = sorted(self._latencies)
            stats.queued = self._in_flight
        if latencies:
            stats.latency_ms_p50 = latencies[len(latencies) // 2]
            stats.latency_ms_p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
        return stats

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_live: weakref.WeakSet[Monitor] = weakref.WeakSet()
_exit_hook_installed = False


def _register_exit_flush(monitor: Monitor) -> None:
    global _exit_hook_installed
    _live.add(monitor)
    if not _exit_hook_installed:
        atexit.register(_close_all)
        _exit_hook_installed = True


def _close_all() -> None:
    for monitor in list(_live):
        try:
            monitor.close(timeout=5.0)
        except Exception:
            pass
