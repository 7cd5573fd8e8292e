"""One Monitor's share of the metrics: what it counts as its records settle, on its worker threads.

The counts are plain numbers under a lock (well under a µs each); the provider's observable instruments
read them when it collects (groundtrace.telemetry.instruments). The SDK calls per record are the
histograms': the scoring duration, one score per metric value, the judge's tokens. A flagged answer's
score is recorded under the request's span context, rebuilt from the record's trace and span ids (the
request's span has long ended when its score arrives), so the SDK keeps it as an exemplar that leads from
a spike to the trace.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from groundtrace.record import Record
from groundtrace.telemetry.evaluations import OUTCOMES, Evaluations
from groundtrace.telemetry.instruments import Instruments


class MonitorSeries:
    """``counts``: the Monitor's own MonitorStats object (held, so its counters never go back down, even
    after the Monitor is gone); ``monitor``: read weakly for the gauges (queue, workers)."""

    def __init__(self, monitor: Any, counts: Any, metric_names: Sequence[str],
                 bind: Callable[[], Instruments | None], on_close: Callable[[], None] | None = None) -> None:
        self._monitor = weakref.ref(monitor)
        self._on_close = on_close
        self.counts = counts
        self.names = list(metric_names)
        self._bind = bind
        self._instruments: Instruments | None = None
        self._lock = threading.Lock()
        self._evaluations = {(name, outcome): 0 for name in self.names for outcome in OUTCOMES}
        self.usd = dict.fromkeys(self.names, 0.0)
        #: Unix time a worker last took or settled a record (Prometheus practice: export the time, and let
        #: a query take `time() - it`); the Monitor's start until then
        self.last_progress = time.time()
        self.closed = False
        #: the scrape endpoint this Monitor serves its metrics on (telemetry "prometheus"), else None
        self.endpoint: Any = None
        self.instruments()

    def instruments(self) -> Instruments | None:
        """The instruments this Monitor records on, once there are any (with telemetry "auto", once the
        application has installed its MeterProvider)."""
        if self._instruments is None:
            self._instruments = self._bind()
            if self._instruments is not None:
                self._instruments.attach(self)
        return self._instruments

    def close(self) -> None:
        """The Monitor closed: its gauges read 0 from now on (its counters stay)."""
        self.closed = True
        if self._on_close is not None:
            self._on_close()

    def after_fork_in_child(self, counts: Any) -> None:
        """In a child forked with the Monitor built: count the child's records (``counts``: its fresh stats). A
        scrape endpoint stays the parent's to serve; the child's series are summed into it
        (groundtrace.telemetry.scrape)."""
        self.counts = counts
        self._lock = threading.Lock()
        self._evaluations = dict.fromkeys(self._evaluations, 0)
        self.usd = dict.fromkeys(self.usd, 0.0)

    # ----------------------------------------------------------------------- the worker's side
    def progress(self) -> None:
        """A worker took a batch or settled a record: the Monitor is not stalled."""
        self.last_progress = time.time()

    def settled(self, record: Record, evaluations: Evaluations | bytes | None, latency_ms: float | None) -> None:
        """Count a settled record. ``evaluations``: its summary, or the scoring process's encoding of it,
        decoded only once there are instruments to record on. Per record, so kept lean."""
        self.last_progress = time.time()
        instruments = self._instruments or self.instruments()
        if instruments is None:  # "auto" with no MeterProvider yet: nothing reads these counts
            return
        if isinstance(evaluations, bytes):
            evaluations = Evaluations.decode(evaluations)
        results = evaluations.results if evaluations is not None else ()
        with self._lock:
            for name, result in zip(self.names, results):  # noqa: B905 - one result per metric, in order
                self._evaluations[(name, result.outcome)] += 1
                self.usd[name] += result.usd
        if latency_ms is not None:
            instruments.duration.record(latency_ms / 1000.0)
        if evaluations is None:
            return
        language = instruments.language(record.language or evaluations.language)
        context = None
        for name, result in zip(self.names, results):  # noqa: B905
            if result.input_tokens or result.output_tokens:  # a judge was asked: both types, as upstream records
                for kind, count in (("input", result.input_tokens), ("output", result.output_tokens)):
                    instruments.tokens.record(count, instruments.token_attributes(name, kind, result.model))
            if result.value is None:
                continue
            if result.hallucinated and context is None:
                context = request_context(record)
            instruments.score.record(result.value, instruments.score_attributes(name, result.label, language),
                                     context=context if result.hallucinated else None)

    # ------------------------------------------------------------------------ read at collection
    def evaluation_counts(self) -> list[tuple[tuple[str, ...], float]]:
        with self._lock:
            return [(key, count) for key, count in self._evaluations.items()]

    def queued(self) -> int:
        monitor = self._monitor()
        return 0 if monitor is None or self.closed else monitor.stats.queued

    def workers(self) -> int:
        monitor = self._monitor()
        return 0 if monitor is None or self.closed else monitor.workers_alive


def request_context(record: Record) -> Any:
    """The OpenTelemetry context of the record's request span, rebuilt from its ids (None without them)."""
    if not record.trace_id or not record.span_id:
        return None
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    try:
        trace_id, span_id = int(record.trace_id, 16), int(record.span_id, 16)
    except ValueError:  # ids that are not hex name no OpenTelemetry span: no exemplar, the value still counts
        return None
    parent = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))
