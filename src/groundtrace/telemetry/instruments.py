"""The Monitor's metrics as OpenTelemetry instruments on one MeterProvider (the opentelemetry-api).

One synchronous instrument, recorded on the Monitor's worker thread as each record settles, never on
the application's thread: ``gen_ai.evaluation.score``, one measurement per metric that returned a value
(an SDK measurement costs several µs, so it is the only one). Everything else is counted in plain
numbers by :class:`groundtrace.telemetry.series.MonitorSeries` and read by observable instruments when
the provider collects (a scrape, an OTLP export): no SDK work per record, and every series exists from
the first collection, zeros included, so "nothing dropped" is a value on a graph and not a missing line.

Attributes are bounded: the metric's name (the Monitor's metrics), the verdict label (three values),
the outcome (three), the language (at most MAX_LANGUAGES codes, then "other") and the service name
(one per provider). Never a question, an answer, a record or trace id: those go to exemplars.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from opentelemetry.metrics import CallbackOptions, Observation

from groundtrace.telemetry.evaluations import OUTCOMES


class MonitorSeries(Protocol):
    """What the observable instruments read of one Monitor's numbers at collection
    (groundtrace.telemetry.series.MonitorSeries keeps them; it imports this module, not the reverse)."""

    counts: Any
    usd: dict[str, float]
    duration_s: float

    def evaluation_counts(self) -> list[tuple[tuple[str, ...], float]]: ...
    def token_counts(self) -> list[tuple[tuple[str, ...], float]]: ...
    def queued(self) -> int: ...
    def workers(self) -> int: ...
    def stalled_s(self) -> float: ...
    def latency_s(self) -> dict[str, float]: ...

# the OpenTelemetry names (the Prometheus exporter writes them with _ for . and a _total or unit suffix)
SCORE = "gen_ai.evaluation.score"
EVALUATIONS = "groundtrace.evaluations"
#: health counters: (MonitorStats field, what it counts)
HEALTH_COUNTERS = (
    ("submitted", "records offered to the Monitor"),
    ("sampled_out", "records the sample rate left out"),
    ("excluded", "records whose run asked not to be scored (groundtrace_exclude)"),
    ("over_budget", "records not taken because groundtrace had used its CPU budget"),
    ("dropped", "records dropped: the queue was full, or the Monitor closed before scoring them"),
    ("scored", "records every metric scored"),
    ("failed", "records at least one metric (or the scoring process) failed on"),
    ("sink_errors", "deliveries a sink failed"),
)
QUEUED, WORKERS, STALLED, LATENCY = ("groundtrace.monitor.queued", "groundtrace.monitor.workers",
                                     "groundtrace.monitor.stalled", "groundtrace.monitor.latency")
DURATION, CPU = "groundtrace.monitor.scoring.duration", "groundtrace.monitor.cpu"
TOKENS, COST = "groundtrace.judge.tokens", "groundtrace.judge.cost.usd"

METRIC, LABEL, OUTCOME, LANGUAGE, SERVICE = ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label",
                                             "groundtrace.outcome", "groundtrace.language", "service.name")
#: scores lie in [0, 1]: the default buckets (0, 5, 10, ..., 10000) would put them all in one
SCORE_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
MAX_LANGUAGES = 16
_CODE = re.compile(r"[a-z]{2,3}")


class Instruments:
    """groundtrace's instruments on one MeterProvider, shared by every Monitor that records there (two
    sets of the same names on one provider would report each series twice)."""

    def __init__(self, provider: Any, service_name: str) -> None:
        meter = provider.get_meter("groundtrace")
        self.service = service_name
        self._series: list[MonitorSeries] = []
        self._languages: set[str] = set()
        self._attributes: dict[tuple[str, str, str], dict[str, str]] = {}
        self._lock = threading.Lock()
        self.score = meter.create_histogram(
            SCORE, unit="1", explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
            description="Evaluation scores in [0, 1], per metric (higher is better for grounding metrics)")
        meter.create_observable_counter(EVALUATIONS, [self._evaluations], unit="{evaluation}",
                                        description="Metric results by outcome: flagged, passed, error")
        for field, description in HEALTH_COUNTERS:
            meter.create_observable_counter(f"groundtrace.monitor.{field}", [self._counter(field)], unit="{record}",
                                            description=description)
        meter.create_observable_gauge(QUEUED, [self._queued], unit="{record}",
                                      description="Records waiting for a worker or being scored")
        meter.create_observable_gauge(WORKERS, [self._workers], unit="{worker}",
                                      description="Worker threads alive (0: the Monitor stopped)")
        meter.create_observable_gauge(STALLED, [self._stalled], unit="s",
                                      description="Seconds without progress while records wait (0: none wait)")
        meter.create_observable_gauge(LATENCY, [self._latency], unit="s",
                                      description="Scoring latency per record, quantiles of the last 2048")
        meter.create_observable_counter(DURATION, [self._duration], unit="s",
                                        description="Seconds spent scoring records (divide by their count)")
        meter.create_observable_counter(CPU, [self._cpu], unit="s", description="CPU seconds groundtrace used")
        meter.create_observable_counter(TOKENS, [self._tokens], unit="{token}", description="Judge tokens")
        meter.create_observable_counter(COST, [self._cost], unit="{USD}", description="Judge spend in US dollars")

    # ------------------------------------------------------------------------------ per record
    def attach(self, series: MonitorSeries) -> None:
        with self._lock:
            self._series.append(series)

    def language(self, code: str | None) -> str:
        """The language attribute: a 2 or 3 letter code, the first MAX_LANGUAGES seen; else other or unknown."""
        if not code:
            return "unknown"
        if code in self._languages:
            return code
        with self._lock:
            if _CODE.fullmatch(code) and len(self._languages) < MAX_LANGUAGES:
                self._languages.add(code)
                return code
        return "other"

    def score_attributes(self, metric: str, label: str, language: str) -> dict[str, str]:
        key = (metric, label, language)
        found = self._attributes.get(key)
        if found is None:  # bounded: metrics x 3 labels x (MAX_LANGUAGES + 2)
            found = self._attributes[key] = {METRIC: metric, LABEL: label, LANGUAGE: language, SERVICE: self.service}
        return found

    # ------------------------------------------------------------------------- observed at collection
    def _all(self) -> list[MonitorSeries]:
        with self._lock:
            return list(self._series)

    def _by(self, keys: Callable[[MonitorSeries], Iterable[tuple[tuple[str, ...], float]]],
            names: tuple[str, ...]) -> Iterator[Observation]:
        """One observation per key, summed over the Monitors recording here."""
        totals: dict[tuple[str, ...], float] = {}
        for series in self._all():
            for key, value in keys(series):
                totals[key] = totals.get(key, 0) + value
        for key, value in totals.items():
            yield Observation(value, {**dict(zip(names, key, strict=True)), SERVICE: self.service})

    def _evaluations(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: s.evaluation_counts(), (METRIC, OUTCOME))

    def _counter(self, field: str) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            return self._by(lambda s: [((), getattr(s.counts, field))], ())
        return observe

    def _queued(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((), s.queued())], ())

    def _workers(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((), s.workers())], ())

    def _stalled(self, options: CallbackOptions) -> Iterator[Observation]:
        worst = max((series.stalled_s() for series in self._all()), default=0.0)
        yield Observation(worst, {SERVICE: self.service})

    def _latency(self, options: CallbackOptions) -> Iterator[Observation]:
        """p50 and p95 in seconds, the worst over the Monitors; none before the first record settles (a 0
        would claim a latency nobody measured)."""
        quantiles: dict[str, float] = {}
        for series in self._all():
            for quantile, seconds in series.latency_s().items():
                quantiles[quantile] = max(seconds, quantiles.get(quantile, 0.0))
        for quantile, seconds in quantiles.items():
            yield Observation(seconds, {"quantile": quantile, SERVICE: self.service})

    def _duration(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((), s.duration_s)], ())

    def _cpu(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((), s.counts.cpu_s)], ())

    def _tokens(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: s.token_counts(), (METRIC, "gen_ai.token.type"))

    def _cost(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((metric,), usd) for metric, usd in s.usd.items()], (METRIC,))


_by_provider: dict[int, tuple[Any, Instruments]] = {}
_registry_lock = threading.Lock()


def instruments_for(provider: Any) -> Instruments:
    """The one set of instruments on ``provider``, made on first use (the provider is held: providers
    live as long as the process)."""
    with _registry_lock:
        found = _by_provider.get(id(provider))
        if found is None or found[0] is not provider:
            found = _by_provider[id(provider)] = (provider, Instruments(provider, service_name(provider)))
        return found[1]


def service_name(provider: Any) -> str:
    """The service.name of the provider's resource (the SDK's, where it has one), else the SDK's default
    resource's (OTEL_SERVICE_NAME, read by the SDK), else unknown_service."""
    resource = getattr(getattr(provider, "_sdk_config", None), "resource", None)  # the SDK keeps it there
    if resource is None:
        try:
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            return "unknown_service"
        resource = Resource.create()
    name = resource.attributes.get("service.name")
    return str(name) if name else "unknown_service"


__all__ = ["COST", "CPU", "DURATION", "EVALUATIONS", "HEALTH_COUNTERS", "Instruments", "LATENCY", "OUTCOMES",
           "QUEUED", "SCORE", "SCORE_BUCKETS", "STALLED", "TOKENS", "WORKERS", "instruments_for", "service_name"]
