"""Monitor: score records in the background of a live application, and never get in its way.

``submit`` is O(1), never blocks and never raises: sampling and the CPU budget decide, then a bounded
queue takes the record or counts a drop. Workers hand the records on in batches (to a scoring
process by default, which scores them and delivers their Scores; see groundtrace.monitor.workers).
Every submitted record ends in exactly one bucket: sampled out, excluded, over budget, dropped,
scored or failed, and the counters add up.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from groundtrace.config import Settings, register_environment_secrets
from groundtrace.monitor.cpu_budget import CpuBudget
from groundtrace.scoring.engine import build_metrics, metric_spec
from groundtrace.metrics import Metric
from groundtrace.monitor.admission import (
    DEFAULT_QUEUE_BYTES,
    EXCLUDE_KEYS,
    QUEUE_SIZED_FROM,
    check_sample_rate,
    choose_isolation,
    record_size,
    sampled,
)
from groundtrace.monitor.at_exit import arm_in_child, register_exit_flush, register_for_fork
from groundtrace.monitor.stats import MonitorStats
from groundtrace.monitor.workers import STOP, BoundedQueue, Workers
from groundtrace.privacy import Mask, load_mask, mask_reference
from groundtrace.record import Checked, PendingRecord, Record
from groundtrace.redaction import RateLimitedWarning, failure_text, get_logger
from groundtrace.score import Score
from groundtrace.scoring.process import ScoringSetup
from groundtrace.sinks import close_sinks, flush_sinks, out_of_process
from groundtrace.sinks.default_store import live_sinks, summary, unrecorded
from groundtrace.sinks.lanes import STALLED_CLOSE_S, Lanes
from groundtrace.telemetry import build_telemetry

log = get_logger("groundtrace.monitor")


def _named(metrics: Sequence[str | Metric] | str) -> set[str]:
    names = metrics.split(",") if isinstance(metrics, str) else metrics
    return {name.strip() if isinstance(name, str) else name.name for name in names}


class Monitor(Workers):
    """Background scoring for live traffic.

    ``metrics``: names or instances (default: grounding). ``sinks``: objects with
    ``emit(record, scores)`` (see groundtrace.sinks), or names; None (default): the configuration's
    (GROUNDTRACE_SINKS), and when none is configured the default store, a JSONL file (see
    groundtrace.sinks.default_store: said once, at the first record); ``"none"`` or ``[]``: no sink,
    silently. ``sample_rate`` in [0, 1] decides
    per trace. ``queue_size`` and ``queue_bytes`` bound memory (the text the waiting records hold, counted
    once the queue backs up); beyond them records are dropped and counted.
    ``metric_timeout_s`` bounds each metric on each record: a metric that hangs yields an error
    Score.

    ``settings``: the configuration, and one rule for every argument it has a value for (metrics, sinks,
    sample_rate, queue_size, workers, metric_timeout_s, options, isolation, ray_address, mask, capture_text,
    cpu_budget, telemetry, exit_flush_s): an argument you pass wins; one you do not pass is the ``settings``'
    value, and without ``settings`` the environment's (GROUNDTRACE_*, read as for the shared Monitor), so
    ``Monitor(["lexical"])`` honours GROUNDTRACE_TELEMETRY and GROUNDTRACE_MASK alike, and
    ``Monitor(..., settings=Settings())`` reads no variable. Of the configured options, a Monitor given its
    metrics takes those of its metrics. The Monitor registers the trace-link lookups of its sinks (MLflow's)
    with ``trace_context`` when it is built.

    Sampling and exclusion are decided here and nowhere else: :meth:`submit` takes a per-call
    ``sample_rate`` (an integration's own, applied together with the Monitor's), and
    :meth:`excludes` is the one rule for the ``groundtrace_exclude`` flag.

    ``isolation``: "process" hands the records to one child process per worker (at the lowest CPU
    priority), which validates, masks, scores and delivers them to the sinks named in the
    configuration that can run there (jsonl, langsmith, phoenix, langfuse); the application's
    process serialises each record once and reads one short line back, and parses Scores only for
    sinks that must run here (otel, mlflow, sink objects). A hung metric's process is killed and
    restarted. "thread" scores in this process (a hung metric's thread is abandoned, since Python
    cannot kill a thread). "auto" (default) takes "process" when every metric is given by name on a
    POSIX system, "thread" otherwise (metric instances cannot be rebuilt in another process). "ray"
    hands each batch to a Ray actor on the cluster at ``ray_address`` ("auto", "HOST:PORT",
    "ray://HOST:PORT"; None: ``settings.ray_address``, i.e. GROUNDTRACE_RAY_ADDRESS, else a local
    cluster), one actor per worker, through a child process that is the Ray driver (so the
    application never joins the cluster); the mask and the sinks still run here. When the cluster is
    unreachable or stops, the batch's records get error Scores and count as failed; the application
    sees nothing. Settings with a ray address make "auto" mean "ray" (needs the ``ray`` extra).

    ``mask``: a function ``str -> str`` (or ``module:function``) applied to each record's question,
    contexts, answer and reference before any metric or sink sees them: in the scoring process when
    it can be loaded there by name (a ``module:function`` string, or a module-level function of an
    importable module), else in this process's worker (a lambda, a closure, a function of
    ``__main__``), before the record leaves it. A record the mask fails on is not scored: the sinks
    get its id (nothing else of it) and every metric's error Score, and it counts as failed.
    ``capture_text=False``: the sinks get no text (values, verdicts and span offsets only). Not passed, both
    are the settings' (GROUNDTRACE_MASK, GROUNDTRACE_CAPTURE_TEXT), as every setting is.

    ``cpu_budget``: the CPU groundtrace may take, as a share of one core (0.25: a quarter core),
    counting its threads in this process and its scoring processes (see groundtrace.monitor.cpu_budget);
    past it new records are not taken (counted ``over_budget``: dropped, in a counter of their own,
    since it is load and not the trace that decides) and no new batch starts until the debt is paid;
    nor are records taken while those waiting would cost more than the budget pays in a second. None (default): ``settings.cpu_budget`` (GROUNDTRACE_CPU_BUDGET), else no bound.

    ``telemetry``: where the Monitor's own metrics go (scores, flagged and error counts, its health; see
    groundtrace.telemetry): "auto" (the application's MeterProvider, else OTLP when the OpenTelemetry
    variables ask for it), "otlp", "prometheus[:[HOST:]PORT]" (a scrape endpoint), a MeterProvider, or
    "none". None (default): ``settings.telemetry`` (GROUNDTRACE_TELEMETRY, default "auto"). They are recorded
    on the workers' threads as records settle, never on the application's.

    ``lazy``: the workers (and their scoring processes) start with the first record submitted, not now; a process
    that never records (a server's supervisor, a reloader that imports the app) then starts none. The Monitors
    ``instrument()`` and groundtrace-run build are lazy.
    """

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Monitor:
        """The Monitor that ``settings`` (default: the environment's) describe, with ``overrides``
        (any argument of the constructor) taking precedence."""
        settings = settings or Settings.from_env()
        arguments: dict[str, Any] = dict(
            metrics=settings.metrics, sinks=settings.sinks, sample_rate=settings.sample_rate,
            queue_size=settings.queue_size, workers=settings.workers, metric_timeout_s=settings.metric_timeout_s,
            options=settings.options, isolation=settings.isolation, mask=settings.mask,
            capture_text=settings.capture_text, cpu_budget=settings.cpu_budget, telemetry=settings.telemetry)
        return cls(settings=settings, **{**arguments, **overrides})

    def __init__(
        self,
        metrics: Sequence[str | Metric] | str | None = None,
        sinks: Sequence[Any] | str | None = None,
        *,
        sample_rate: float | None = None,
        queue_size: int | None = None,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        workers: int | None = None,
        metric_timeout_s: float | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        isolation: str | None = None,
        linger_s: float = 0.02,
        batch_size: int = 64,
        flush_at_exit: bool = True,
        settings: Settings | None = None,
        ray_address: str | None = None,
        mask: Mask | str | None = None,
        capture_text: bool | None = None,
        cpu_budget: float | None = None,
        telemetry: Any = None,
        exit_flush_s: float | None = None,
        lazy: bool = False,
    ) -> None:
        from groundtrace.sinks import build_sinks, register_trace_links

        register_environment_secrets()  # settings or none: the environment's keys are never written
        # one rule for every setting: what is passed wins, the rest is the settings' (the environment's without)
        settings = settings if settings is not None else Settings.from_env()
        if options is None:  # the configured options of the metrics scored (of others, when metrics are passed)
            options = settings.options if metrics is None else \
                {name: value for name, value in settings.options.items() if name in _named(metrics)}
        metrics = settings.metrics if metrics is None else metrics
        sample_rate = settings.sample_rate if sample_rate is None else sample_rate
        queue_size = settings.queue_size if queue_size is None else queue_size
        workers = settings.workers if workers is None else workers
        metric_timeout_s = settings.metric_timeout_s if metric_timeout_s is None else metric_timeout_s
        isolation = settings.isolation if isolation is None else isolation
        mask = settings.mask if mask is None else mask
        capture_text = settings.capture_text if capture_text is None else capture_text
        cpu_budget = settings.cpu_budget if cpu_budget is None else cpu_budget
        exit_flush_s = settings.exit_flush_s if exit_flush_s is None else exit_flush_s
        check_sample_rate(sample_rate)
        self.mask = load_mask(mask)
        self.capture_text = capture_text
        self.metrics = build_metrics(metrics, options, settings)
        names, self.default_store = live_sinks(sinks, settings)
        # sinks given by name are configured by the settings, read once, here and for the scoring process alike
        sink_settings = settings
        # a sink that cannot be built here is left out, said once (a name that is no sink raises)
        built = [(name, build_sinks([name], sink_settings, tolerant=True)) for name in names]
        names = [name for name, sink in built if sink]
        self.sinks = [sink[0] for _, sink in built if sink]
        register_trace_links(self.sinks)
        for sink in self.sinks:  # a sink that learns later that it did not deliver (an exporter's failure) says so here
            if hasattr(sink, "report_undelivered"):
                sink.report_undelivered = self._count_sink_errors
        ray_address = ray_address or settings.ray_address
        self.isolation = choose_isolation(isolation, metrics, ray_address)
        # what the scoring process rebuilds them from: a verdict file is read here only, once
        specs = [metric_spec(m, (options or {}).get(m.name, {})) for m in self.metrics]
        self.sample_rate = sample_rate
        self.metric_timeout_s = metric_timeout_s
        self.linger_s = linger_s
        self.batch_size = max(1, batch_size)
        self.exit_flush_s = exit_flush_s
        self._queue_bounds = (queue_size, queue_bytes)
        self._budget_share = cpu_budget
        self._worker_count = max(1, workers)
        self._forked_from: int | None = None  # the parent's pid, in a child forked with this Monitor built
        self._closed = False
        self._close_done = threading.Event()
        self._warmed: dict[str, str] | None = None  # the metrics that cannot load, once warmed up here
        self._fresh_state()
        telemetry = settings.telemetry if telemetry is None else telemetry
        self.telemetry = self._telemetry(telemetry, settings)
        # the sinks the scoring process builds and feeds itself; the rest (otel, mlflow, objects) run here
        moved = [out_of_process(name, sink) for name, sink in zip(names, self.sinks, strict=True)] \
            if self.isolation == "process" else [False] * len(self.sinks)
        self._own_sinks = [sink for sink, away in zip(self.sinks, moved, strict=True) if not away]
        own_mask = mask_reference(mask) if isinstance(mask, str) else mask_reference(self.mask)
        self._masks_travel = self.isolation == "process" and (self.mask is None or own_mask is not None)
        setup = ScoringSetup(specs, [name for name, away in zip(names, moved, strict=True) if away],
                             sink_settings.to_json() if any(moved) and sink_settings is not None else None,
                             own_mask if self._masks_travel else None, self.capture_text, bool(self._own_sinks),
                             evaluations=self.telemetry is not None)
        self._setup, self._ray_address = setup, ray_address
        try:
            if not lazy:
                self._start_workers()
        except BaseException:  # a Monitor that never starts serves no metrics: its endpoint is let go
            if self.telemetry is not None:
                self.telemetry.close()
            raise
        register_for_fork(self)
        if flush_at_exit:
            register_exit_flush(self)

    def _fresh_state(self) -> None:
        """The queue, the counts and everything with a lock or a thread: made here, and made anew in a child
        the process forks (the parent's records, threads and scoring processes stay the parent's)."""
        queue_size, queue_bytes = self._queue_bounds
        # the waiting records: a deque bounded under the lock, and an event that wakes a worker
        # (cheaper than queue.Queue, whose every put and get takes a Condition)
        self._queue = BoundedQueue(queue_size, queue_bytes, max(1, min(self.batch_size, queue_size // 2)))
        self._filling = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._stats = MonitorStats()
        self._latencies: deque[float] = deque(maxlen=2048)
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._abandon = False
        self._references: dict[int, tuple[Any, str | None]] = {}
        self._flagged_by = dict.fromkeys((m.name for m in self.metrics), 0)
        self._stored = 0  # records delivered to the default store
        self._no_record_reasons: dict[str, int] = {}
        self._lanes = Lanes(self._count_sink_errors)  # one delivery lane per sink fed in this process
        # a full queue's drops (by count, by bytes), and those said (as a rate, by the workers)
        self._full_drops = self._bytes_drops = self._drops_said = self._bytes_drops_said = 0
        self._drop_warning = RateLimitedWarning(log, "records dropped")
        self._warm_lock = threading.Lock()
        self.budget = None if self._budget_share is None else CpuBudget(self._budget_share)
        self._workers: list[threading.Thread] = []
        self._scorers: list[Any] = []
        self._metric_pool = ThreadPoolExecutor(max_workers=self._worker_count * max(1, len(self.metrics)) * 2,
                                               thread_name_prefix="groundtrace-metric")
        self._start_lock = threading.Lock()
        self._started = False

    def _start_workers(self) -> None:
        """The scorers and the worker threads: in the constructor, or at the first record (a lazy Monitor, a forked
        child's). Cheap: each worker starts its scoring process on its own thread."""
        with self._start_lock:
            if self._started:
                return
            self._scorers = [self._scorer(self._setup, self._ray_address) for _ in range(self._worker_count)]
            self._workers = [
                threading.Thread(target=self._work, args=(scorer,), name=f"groundtrace-worker-{i}", daemon=True)
                for i, scorer in enumerate(self._scorers)
            ]
            for worker in self._workers:
                worker.start()
            self._started = True
        if self._forked_from is not None:
            arm_in_child(self)

    def after_fork_in_child(self, parent: int) -> None:
        """This process was forked from ``parent`` with this Monitor built (gunicorn --preload, multiprocessing
        with fork, Celery's prefork pool): start empty; the workers start with the first record submitted here."""
        self._forked_from = parent
        self._fresh_state()
        if self.telemetry is not None:
            self.telemetry.after_fork_in_child(self._stats)

    def _telemetry(self, spec: Any, settings: Settings | None) -> Any:
        """The Monitor's metrics as ``spec`` says, or none when they cannot be had here (a port in use, a
        missing extra, no endpoint): said once, and the Monitor scores and delivers as before. A spec that
        is no spec at all is a programming error, raised."""
        from groundtrace.config import check_telemetry

        if isinstance(spec, str):
            check_telemetry(spec)
        try:
            return build_telemetry(spec, settings, self, self._stats, [m.name for m in self.metrics])
        except Exception as error:
            log.warning("groundtrace: the Monitor's own metrics (telemetry=%r) are off: %s. Scoring and the sinks "
                        "go on; fix the setting (GROUNDTRACE_TELEMETRY) to have them", spec, error)
            return None

    def _scorer(self, setup: ScoringSetup, ray_address: str | None) -> Any:
        if self.isolation == "process":
            return setup.build()
        if self.isolation == "ray":
            from groundtrace.ray.live import RayScorer

            return RayScorer(setup.specs, ray_address)
        return None

    # ------------------------------------------------------------------------------ the hot path
    @staticmethod
    def excludes(metadata: Mapping[str, Any] | None) -> bool:
        """Whether metadata (a Record's, or a run's tags an integration reads when a request starts)
        asks to keep the request out of scoring: ``groundtrace_exclude`` (or ``groundtrace.exclude``)."""
        if not metadata:  # most records and runs carry none: no generator for them (this runs on every request)
            return False
        return any(metadata.get(key) for key in EXCLUDE_KEYS)

    @property
    def shows_raw_text(self) -> bool:
        """Whether what the Monitor delivers may carry the text as captured (no mask, text captured):
        an adapter that writes text of its own onto a trace asks first."""
        return self.capture_text and self.mask is None

    def submit(self, record: Record | PendingRecord, *, sample_rate: float | None = None,
               mask: Mask | None = None) -> bool:
        """Offer a record for scoring; True if it was queued. Never blocks, never raises.

        ``sample_rate``: a caller's own rate (a handler's), applied with the Monitor's by the same
        deterministic rule, so the record is kept at the smaller of the two. ``mask``: a caller's own
        mask (a handler's), applied before the Monitor's, in the worker or the scoring process. A
        PendingRecord (an integration's capture of a request) is built by the worker, and only if it
        is kept (record.realize)."""
        counted = False
        try:
            bucket = None
            if self.excludes(record.metadata):
                bucket = "excluded"
            else:
                rate = self.sample_rate if sample_rate is None else min(self.sample_rate, sample_rate)
                if rate < 1.0 and not sampled(record.trace_id or record.run_id or record.id or str(id(record)), rate):
                    bucket = "sampled_out"
            if bucket is None and not self._started and not self._closed:
                # a lazy Monitor's first record, or a forked child's: threads start here, their scoring process
                # on them (this thread never waits for a child); a failure to start counts this record dropped
                self._start_workers()
            with self._lock:
                self._stats.submitted += 1
                counted = True
                if bucket is None and self.budget is not None and not self.budget.admits(self._in_flight):
                    bucket = "over_budget"
                queue = self._queue
                # bounded by bytes too once the queue backs up (sizing a record reads its lengths, not its text)
                size = record_size(record) if bucket is None and len(queue) >= QUEUE_SIZED_FROM else 0
                if self._closed:
                    bucket = "dropped"
                elif bucket is None and len(queue) >= queue.maxsize:
                    bucket = "dropped"
                    self._full_drops += 1  # said as a rate by the workers, with the bound that dropped it
                elif bucket is None and queue.bytes + size > queue.max_bytes:
                    bucket = "dropped"
                    self._bytes_drops += 1
                if bucket is not None:
                    setattr(self._stats, bucket, getattr(self._stats, bucket) + 1)
                    return False
                self._in_flight += 1
                queue.append((record, mask, size))
                queue.bytes += size
                if len(queue) >= queue.enough:  # a worker lingering for a batch takes it now, before it fills
                    self._filling.set()
            self._wake.set()
            return True
        except Exception as error:  # the application must never see our failure; nor its text the log
            log.warning("groundtrace: submit failed: %s", failure_text(error))
            with self._lock:
                self._stats.submitted += not counted
                self._stats.dropped += 1
            return False

    def submit_scored(self, record: Record, scores: Sequence[Score], *, sample_rate: float | None = None,
                      mask: Mask | None = None) -> bool:
        """Offer a record a guard has already scored with this Monitor's metrics: the workers mask it and deliver
        ``scores`` to every sink, with its metrics, as if they had scored it (never twice). As :meth:`submit`."""
        return self.submit(Checked(record, list(scores)), sample_rate=sample_rate, mask=mask)

    def _count_sink_errors(self, count: int) -> None:
        with self._lock:
            self._stats.sink_errors += count

    def note_no_record(self, reason: str) -> None:
        """A turn the Monitor's integration saw ended with no Record (``reason``): counted, for the exit
        summary and ``stats.no_record``. Never raises."""
        try:
            with self._lock:
                self._stats.no_record += 1
                self._no_record_reasons[reason] = self._no_record_reasons.get(reason, 0) + 1
        except Exception:
            pass

    # ------------------------------------------------------------------------------- lifecycle
    def flush(self, timeout: float | None = None, *, stall_s: float | None = None) -> bool:
        """Wait until every queued record is settled; False if ``timeout`` (or a sink's ``stall_s``) ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._in_flight:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        if not self._lanes.wait(None if deadline is None else deadline - time.monotonic(), stall_s):
            return False  # a sink is still delivering
        for problem in flush_sinks(self.sinks):
            log.warning("groundtrace: %s", problem)
        return True

    def close(self, timeout: float | None = 10.0, *, stall_s: float | None = None) -> None:
        """Flush, then stop the workers and the sinks. Safe to call twice. What ``timeout`` leaves unsettled is
        dropped (and counted): what waits in the queue, and what a scoring process still holds (it is killed); a
        record a thread worker holds is still settled when its metric returns. ``stall_s`` (the exit's): a sink
        whose emit has run that long without returning is not waited for."""
        with self._lock:
            closing = self._closed
            self._closed = True
        if closing:  # a second close (SIGTERM during the exit flush) waits for the first, within its own time
            self._close_done.wait(timeout)
            return
        try:
            self._close(timeout, stall_s)
        finally:
            self._close_done.set()

    def _close(self, timeout: float | None, stall_s: float | None = None) -> None:
        started, dropped_before = time.monotonic(), self._stats.dropped
        if not self.flush(timeout, stall_s=stall_s):
            self._abandon = True
        stalled = self._lanes.say_stalled(stall_s, time.monotonic() - started, timeout)
        self._drop_queued()
        self._queue.extend(STOP for _ in self._workers)
        self._wake.set()
        for worker in self._workers:
            worker.join(timeout=1.0)
        self._say_losses()  # queue-full drops not said yet
        self._drop_warning.settle()
        with self._lock:
            lost, in_flight = self._stats.dropped - dropped_before, self._in_flight
        if lost or in_flight:
            log.warning("groundtrace: %d record(s) not scored when the Monitor closed after %.1f s (%d dropped from the "
                        "queue or a stopped scoring process%s): flush() before the process ends, or give close() more "
                        "time", lost + in_flight, time.monotonic() - started, lost,
                        f", {in_flight} still being scored" if in_flight else "")
        # what a sink has not delivered by now is counted as its errors; nothing is emitted after close returns
        self._lanes.close(max(0.0, (10.0 if timeout is None else timeout) - (time.monotonic() - started)), stall_s)
        self._metric_pool.shutdown(wait=False, cancel_futures=True)
        if self.telemetry is not None:
            self.telemetry.close()
        for problem in close_sinks(self.sinks, **({"timeout_s": STALLED_CLOSE_S} if stalled else {})):  # not 10 s
            log.warning("groundtrace: %s", problem)
        stats = self.stats
        log.info("groundtrace: monitor closed: %s", stats.as_dict())
        if self.default_store is not None and (self._stored or stats.no_record):
            # the newcomer's path: where the scores are, once more, and the turns that made none
            log.warning(summary(self.default_store, self._stored, stats.failed, stats.flagged, self._flagged_by,
                                dict(self._no_record_reasons)))
        elif stats.no_record:
            log.warning(unrecorded(dict(self._no_record_reasons)))

    @property
    def workers_alive(self) -> int:
        """Worker threads still running (0 once the Monitor is closed, or if they died); before its first record
        a lazy Monitor (or one in a forked child) counts those it will start with it."""
        if not self._started and not self._closed:
            return self._worker_count
        return sum(worker.is_alive() for worker in self._workers)

    @property
    def stats(self) -> MonitorStats:
        with self._lock:
            stats = replace(self._stats)
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
