"""The Monitor's workers: take records from its queue in batches, have them scored, settle each one.

A worker waits for a record, lingers a moment (``linger_s``) and takes what queued up meanwhile, so
the application hands its GIL to the worker once per batch, not once per record. Then, by isolation:

- "process": the batch goes to the worker's scoring process, which masks, scores and delivers
  (groundtrace.scoring.process); here only the application's own sinks are fed, if it has any;
- "ray": the records (masked here) go to a Ray actor; the Scores come back and the sinks run here;
- "thread": the metrics run here, each under its timeout in a thread pool; the sinks run here.

With a CPU budget the worker waits out any debt before it starts a batch and sizes the batch to
what the budget holds; the CPU it uses is spent from the budget, with the scoring process's (which
reports its own) and, for "thread", the metrics' threads'.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from groundtrace.monitor.cpu_budget import CpuBudget
from groundtrace.metrics import Metric
from groundtrace.privacy import Mask, chain_masks, mask_reference, take_in, text_free_record, text_free_score
from groundtrace.record import (Checked, InvalidInput, PendingRecord, Record, bound_record, placeholder_record,
                                realize)
from groundtrace.redaction import RateLimitedWarning, get_logger
from groundtrace.score import Score
from groundtrace.scoring.child import flagged_mask, warm_up_all
from groundtrace.scoring.process import Item, Outcome, ScoringProcess
from groundtrace.sinks.lanes import Lanes
from groundtrace.sinks.default_store import announce
from groundtrace.telemetry.evaluations import Evaluations, failed, summarize

log = get_logger("groundtrace.monitor")
STOP = object()


class BoundedQueue(deque[Any]):
    """The records waiting for a worker, ``(record, mask, size)``: a deque that knows its bounds (``queue_size``
    records, ``queue_bytes`` of their text), which submit() checks under the Monitor's lock, and how many
    records are ``enough`` for a lingering worker to take its batch at once."""

    def __init__(self, maxsize: int, max_bytes: int = 1 << 62, enough: int = 1) -> None:
        super().__init__()
        self.maxsize, self.max_bytes, self.enough = maxsize, max_bytes, enough
        self.bytes = 0  # changed under the Monitor's lock


class Workers:
    """The worker half of :class:`groundtrace.monitor.Monitor` (whose constructor sets these)."""

    _queue: BoundedQueue
    _wake: threading.Event
    _filling: threading.Event
    _lock: threading.Lock
    _idle: threading.Condition
    _stats: Any
    _latencies: deque[float]
    _in_flight: int
    _abandon: bool
    _references: dict[int, tuple[Any, str | None]]
    _masks_travel: bool
    _own_sinks: list[Any]
    _lanes: Lanes
    _drops_said: int
    _full_drops: int
    _bytes_drops: int
    _bytes_drops_said: int
    _drop_warning: RateLimitedWarning
    _metric_pool: ThreadPoolExecutor
    budget: CpuBudget | None
    metrics: list[Metric]
    sinks: list[Any]
    mask: Mask | None
    capture_text: bool
    isolation: str
    metric_timeout_s: float
    linger_s: float
    batch_size: int
    default_store: Path | None
    _flagged_by: dict[str, int]
    _stored: int
    _warmed: dict[str, str] | None
    _warm_lock: threading.Lock
    telemetry: Any  # groundtrace.telemetry.series.MonitorSeries, or None

    def _work(self, scorer: Any) -> None:
        if scorer is not None:
            try:  # start the child now rather than on the first record
                scorer.warm_up()
            except Exception as error:
                if isinstance(scorer, ScoringProcess):
                    self._fall_back(scorer, str(error))
                    scorer = None
                else:  # a Ray cluster not there (yet): its batches fail, counted, and it is tried again
                    log.warning("groundtrace: the scorer did not start (%s); retrying with the next batch", error)
        if scorer is None:  # load the metrics' models here, before the first record's time budget starts
            self._warm_here()
        while True:
            self._pay_debt()
            batch = self._next_batch(self.budget.batch_limit(self.batch_size) if self.budget else self.batch_size)
            stop = STOP in batch
            batch = [item for item in batch if item is not STOP]
            if batch:
                if isinstance(scorer, ScoringProcess) and scorer.start_failure is not None:
                    self._fall_back(scorer, scorer.start_failure)  # it died and cannot start again
                    scorer = None
                self._score_batch(scorer, batch)
            self._say_losses()
            if stop:
                if scorer is not None:
                    scorer.close()
                return

    def _warm_here(self) -> None:
        """The metrics' models loaded in this process, once for all workers."""
        with self._warm_lock:
            if self._warmed is None:
                self._warmed = warm_up_all(self.metrics)

    def _fall_back(self, scorer: Any, why: str) -> None:
        """A scoring process that cannot start (a broken environment, a read-only mount, killed at start-up):
        this worker scores in this process instead, with every sink here, and says so once. The records are
        scored, at normal CPU priority, rather than all failing."""
        try:
            scorer.close()
        except Exception:
            pass
        with self._warm_lock:
            if self.isolation == "process":  # the first worker to fall back switches the Monitor and says it
                self.isolation, self._own_sinks, self._masks_travel = "thread", list(self.sinks), False
                log.warning("groundtrace: the scoring process cannot start (%s); scoring goes on in this process's "
                            "worker threads instead (isolation='thread', normal CPU priority). Fix the cause and "
                            "restart to score in a child process again", why)
        self._warm_here()

    def _say_losses(self) -> None:
        """Records dropped because the queue was full since the last look: said as a rate (on this thread,
        never the application's)."""
        dropped, by_bytes = self._full_drops, self._bytes_drops
        new, self._drops_said = dropped - self._drops_said, dropped
        new_by_bytes, self._bytes_drops_said = by_bytes - self._bytes_drops_said, by_bytes
        if new > 0:
            self._drop_warning.failed(f"{new} not scored: the queue was full ({self._queue.maxsize} records): raise "
                                      "queue_size (GROUNDTRACE_QUEUE_SIZE), lower sample_rate, or add workers", times=new)
        if new_by_bytes > 0:
            mib = self._queue.max_bytes / 2**20
            self._drop_warning.failed(f"{new_by_bytes} not scored: the records waiting held {mib:g} MiB of text, the "
                                      f"queue's bound (queue_bytes), with {len(self._queue)} of {self._queue.maxsize} "
                                      "places taken: raise Monitor(queue_bytes=...), lower sample_rate, or add workers",
                                      times=new_by_bytes)

    def _pay_debt(self) -> None:
        """Over the CPU budget: start nothing until the debt is paid (or the Monitor gives up)."""
        while self.budget is not None and not self._abandon:
            wait = self.budget.wait_s()
            if wait <= 0:
                return
            time.sleep(min(wait, 0.25))

    def _next_batch(self, most: int) -> list[Any]:
        """Wait for a record, linger a moment, then take what has queued up meanwhile (up to ``most``).

        While this thread lingers it waits on nothing, so submit() wakes no one: the application
        hands its GIL to this thread once per batch rather than once per record."""
        batch = [self._take()]
        if batch[0] is STOP:
            return batch
        self._filling.clear()
        if len(self._queue) < self._queue.enough:  # a small queue is not left to fill while this thread lingers
            self._filling.wait(self.linger_s)
        pending = self._queue
        while len(batch) < most:
            try:
                batch.append(pending.popleft())
            except IndexError:
                break
        sizes = sum(item[2] for item in batch if item is not STOP)
        if sizes:
            with self._lock:
                self._queue.bytes -= sizes
        return batch

    def _take(self) -> Any:
        """The next waiting item, waiting for one (submit() appends, then sets the event)."""
        while True:
            try:
                return self._queue.popleft()
            except IndexError:
                pass
            self._wake.clear()
            if not self._queue:  # an append after clear() sets the event again: no wake-up is lost
                self._wake.wait()

    # ---------------------------------------------------------------------------------- taking in
    def _reference(self, mask: Mask) -> str | None:
        """The name a scoring process loads a caller's mask by (None: it must run here); looked up once per mask."""
        found = self._references.get(id(mask))
        if found is None or found[0] is not mask:
            found = self._references[id(mask)] = (mask, mask_reference(mask))  # holds the mask: its id stays its own
        return found[1]

    def _take_in(self, batch: list[tuple[Record | PendingRecord, Mask | None, int]]) -> list[Item]:
        """The batch's items. A mask that can travel is applied by the scoring process; any other is
        applied here, before the record leaves. A record the mask fails on becomes an "i" item: what is
        delivered for it is its id and every metric's error Score. A PendingRecord is built here first
        (one whose build fails becomes an "i" item too)."""
        items = []
        for submitted, call_mask, _ in batch:
            record = realize(submitted)
            if isinstance(record, Record):  # cut to the bounds a Record keeps before it is masked, copied or piped
                record = bound_record(record)
            if isinstance(record, InvalidInput):
                log.warning("groundtrace: record %s not scored: %s", record.id, record.message)
                items.append(Item(placeholder_record(record), kind="i", reason=record.message))
                continue
            reference = None if call_mask is None else self._reference(call_mask)
            if self._masks_travel and (call_mask is None or reference is not None):
                items.append(Item(record, masked=call_mask is None and self.mask is None, mask=reference))
                continue
            taken = take_in(record, chain_masks(call_mask, self.mask))
            if isinstance(taken, InvalidInput):
                log.warning("groundtrace: record %s not scored: %s", record.id, taken.message)
                items.append(Item(placeholder_record(taken), kind="i", reason=taken.message))
            else:
                items.append(Item(taken))
        return items

    # ------------------------------------------------------------------------------------ scoring
    def _score_batch(self, scorer: Any, batch: list[tuple[Record | PendingRecord, Mask | None, int]]) -> None:
        if any(type(entry[0]) is Checked for entry in batch):
            self._deliver_checked([entry for entry in batch if type(entry[0]) is Checked])
            batch = [entry for entry in batch if type(entry[0]) is not Checked]
            if not batch:
                return
        started_cpu = time.thread_time()
        spent_before = self._stats.cpu_s
        if self.telemetry is not None:
            self.telemetry.progress()
        items = self._take_in(batch)
        if isinstance(scorer, ScoringProcess):
            scorer.run(items, self.metric_timeout_s, self._settle, self._abandoning)
        else:
            self._score_here(scorer, items)
        self._spend(time.thread_time() - started_cpu)
        if self.budget is not None:  # with several workers this counts the others' too: smaller batches, no harm
            self.budget.note_records(len(items), self._stats.cpu_s - spent_before)

    def _deliver_checked(self, batch: list[tuple[Any, Mask | None, int]]) -> None:
        """Records a guard scored on the request's path (Monitor.submit_scored): masked here, their Scores delivered
        to every sink and counted as the Monitor's own; no metric runs again and no scoring process sees them."""
        for checked, call_mask, _ in batch:
            mask = chain_masks(call_mask, self.mask)
            taken = take_in(bound_record(checked.record), mask)
            if isinstance(taken, InvalidInput):
                log.warning("groundtrace: record %s not scored: %s", taken.id, taken.message)
                record = placeholder_record(taken)
                self._settle(Item(record, kind="i", reason=taken.message), Outcome(
                    "failed", deliver=(record, [m.score(taken) for m in self.metrics]), everywhere=True))
                continue
            # they were made from the unmasked text (their reasons and spans quote it): with a mask, without text
            given = {score.metric: score if mask is None else text_free_score(score) for score in checked.scores}
            scores = [given.get(m.name) or m.error("the guard did not score this metric", taken.id)
                      for m in self.metrics]
            self._settle(Item(taken), Outcome("scored" if all(s.ok for s in scores) else "failed",
                                              deliver=(taken, scores), flagged=flagged_mask(scores), everywhere=True))

    def _spend(self, cpu_s: float) -> None:
        """CPU that groundtrace used (a worker's thread, a metric's, a scoring process's): counted, and
        spent from the budget."""
        if cpu_s <= 0:
            return
        with self._lock:
            self._stats.cpu_s += cpu_s
        if self.budget is not None:
            self.budget.spend(cpu_s)

    def _abandoning(self) -> bool:
        return self._abandon

    def _score_here(self, scorer: Any, items: list[Item]) -> None:
        """Scores made in this process ("thread") or returned by Ray, delivered to the sinks here."""
        started = time.perf_counter()
        invalid = [item for item in items if item.kind == "i"]
        for item in invalid:  # the same error Scores the batch engines give it
            problem = InvalidInput(id=item.record.id, message=item.reason or "invalid record")
            self._settle(item, Outcome("failed", deliver=(item.record, [m.score(problem) for m in self.metrics])))
        items = [item for item in items if item.kind != "i"]
        if not items:
            return
        try:
            if scorer is not None:
                errors = [metric.error for metric in self.metrics]
                all_scores = scorer.score_many([item.record for item in items], self.metric_timeout_s, errors)
            else:
                all_scores = [[self._score(metric, item.record) for metric in self.metrics] for item in items]
        except Exception as error:
            log.exception("groundtrace: scoring a batch failed")
            all_scores = [[m.error(f"{type(error).__name__}: {error}", item.record.id) for m in self.metrics]
                          for item in items]
        per_record_ms = (time.perf_counter() - started) * 1000.0 / len(items)
        for item, scores in zip(items, all_scores, strict=False):
            status = "scored" if all(s.ok for s in scores) else "failed"
            self._settle(item, Outcome(status, latency_ms=per_record_ms, deliver=(item.record, scores),
                                       flagged=flagged_mask(scores)))

    def _score(self, metric: Metric, record: Record) -> Score:
        cannot_load = (self._warmed or {}).get(metric.name)
        if cannot_load is not None:  # a setting that will not heal: no new attempt, the reason at once
            return metric.error(cannot_load, record.id)
        try:
            future = self._metric_pool.submit(self._measured, metric, record)
        except RuntimeError:  # the interpreter is exiting (its pools take nothing more): scored here, as close allows
            return self._measured(metric, record)
        try:
            return future.result(timeout=self.metric_timeout_s)
        except FutureTimeout:
            future.cancel()
            log.warning("groundtrace: metric %s timed out on record %s", metric.name, record.id)
            return metric.error(f"timed out after {self.metric_timeout_s:g} s (metric_timeout_s)", record.id)
        except Exception as error:  # metric.score does not raise; this is belt and braces
            return metric.error(f"{type(error).__name__}: {error}", record.id)

    def _measured(self, metric: Metric, record: Record) -> Score:
        """``metric.score(record)`` on a pool thread, whose CPU is spent (see :meth:`_spend`)."""
        started = time.thread_time()
        try:
            return metric.score(record)
        finally:
            self._spend(time.thread_time() - started)

    # ----------------------------------------------------------------------------------- settling
    def _settle(self, item: Item, outcome: Outcome) -> None:
        """Feed the sinks that run here, then count the item in its bucket: scored, failed or dropped."""
        sink_errors = outcome.sink_errors
        self._spend(outcome.cpu_s)
        try:  # each sink's lane delivers it, on a thread of its own; a sink's failure is counted by its lane
            if outcome.unscored is not None:  # no scoring process took it: every sink gets its error Scores from here
                record = item.record if item.masked else text_free_record(item.record)  # unmasked text stays here
                scores = [metric.error(outcome.unscored, item.record.id) for metric in self.metrics]
                self._lanes.deliver(self.sinks, record, scores, capture_text=self.capture_text)
            elif outcome.deliver is not None and (self._own_sinks or outcome.everywhere):
                record, scores = outcome.deliver
                # a scoring process already took the text out when capture_text is off
                self._lanes.deliver(self.sinks if outcome.everywhere else self._own_sinks, record, scores,
                                    capture_text=self.capture_text or (self.isolation == "process"
                                                                       and not outcome.everywhere))
        except Exception:
            log.exception("groundtrace: delivering record %s failed", item.record.id)
        if self.telemetry is not None:  # before it counts as settled: a flush() returns with its metrics recorded
            self._record_metrics(item, outcome)
        with self._lock:
            bucket = "dropped" if outcome.status == "dropped" else \
                "scored" if outcome.status == "scored" and outcome.unscored is None else "failed"
            setattr(self._stats, bucket, getattr(self._stats, bucket) + 1)
            if outcome.flagged:
                self._stats.flagged += 1
                for index, metric in enumerate(self.metrics):
                    if outcome.flagged >> index & 1:
                        self._flagged_by[metric.name] += 1
            stored = self.default_store is not None and bucket != "dropped"
            self._stored += stored
            self._stats.sink_errors += sink_errors
            if outcome.latency_ms is not None:
                self._latencies.append(outcome.latency_ms)
            self._in_flight -= 1
            self._idle.notify_all()
        if stored and self.default_store is not None:
            announce(self.default_store)  # once per process: the first record that reached the default store

    def _record_metrics(self, item: Item, outcome: Outcome) -> None:
        """The Monitor's metrics of one settled record, here on the worker's thread (never the application's)."""
        try:
            summary: Evaluations | bytes | None = outcome.evaluations
            if summary is None and self.telemetry.instruments() is not None:  # made only when recorded
                if outcome.unscored is not None:
                    summary = failed(len(self.metrics), item.record.language)
                elif outcome.deliver is not None:
                    summary = summarize(*outcome.deliver)
            self.telemetry.settled(item.record, summary, outcome.latency_ms)
        except Exception:  # a metrics bug must not stop the worker; said each time, never swallowed
            log.exception("groundtrace: recording the metrics of record %s failed", item.record.id)

    def _drop_queued(self) -> None:
        """Records still waiting when close() gives up are dropped, and counted as such."""
        while True:
            try:
                item = self._queue.popleft()
            except IndexError:
                return
            if item is STOP:
                continue
            with self._lock:
                self._queue.bytes -= item[2]
                self._stats.dropped += 1
                self._in_flight -= 1
                self._idle.notify_all()
