"""The Monitor's metrics as OpenTelemetry instruments on one MeterProvider (the opentelemetry-api).

Names: groundtrace's own under ``groundtrace.*`` (the ``gen_ai.*`` namespace is the GenAI semantic
conventions'); the judge's tokens on upstream's ``gen_ai.client.token.usage``. Attribute keys in
``gen_ai.*`` are only those the conventions define (``gen_ai.evaluation.name``,
``gen_ai.evaluation.score.label``, ``gen_ai.token.type``, ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``); the rest are ``groundtrace.*``.

Synchronous instruments, recorded on the Monitor's worker thread as each record settles, never on the
application's thread (an SDK measurement costs a few µs): the score histogram, one measurement per metric
value; the scoring duration histogram, one per record; the token histogram, two per judged metric.
Everything else is counted in plain numbers by :class:`groundtrace.telemetry.series.MonitorSeries` and read
by observable instruments when the provider collects (a scrape, an OTLP export): every such series exists
from the first collection, zeros included, so "nothing dropped" is a value on a graph, not a missing line.

Attributes are bounded: the metric's name, the verdict label (three values), the outcome (three), the
language (at most MAX_LANGUAGES codes, then "other"), the judge's model. Never a question, an answer, a
record or trace id (those go to exemplars), and never the resource's attributes (service.name and the
rest): the provider's resource carries them, which the Prometheus exporter writes as ``target_info``.
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
    last_progress: float

    def evaluation_counts(self) -> list[tuple[tuple[str, ...], float]]: ...
    def queued(self) -> int: ...
    def workers(self) -> int: ...

# the OpenTelemetry names (the Prometheus exporter writes them with _ for . and a _total or unit suffix)
SCORE = "groundtrace.evaluation.score"
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
QUEUED, WORKERS = "groundtrace.monitor.queued", "groundtrace.monitor.workers"
LAST_PROGRESS = "groundtrace.monitor.last_progress.timestamp"
DURATION, CPU = "groundtrace.monitor.scoring.duration", "groundtrace.monitor.cpu"
TOKENS, COST = "gen_ai.client.token.usage", "groundtrace.judge.cost.usd"
GUARD_DECISIONS, GUARD_DURATION = "groundtrace.guard.decisions", "groundtrace.guard.duration"
GUARD_ACTION, GUARD_TIMED_OUT = "groundtrace.guard.action", "groundtrace.guard.timed_out"

METRIC, LABEL, OUTCOME, LANGUAGE = ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label",
                                    "groundtrace.outcome", "groundtrace.language")
TOKEN_TYPE, OPERATION, PROVIDER, MODEL = ("gen_ai.token.type", "gen_ai.operation.name", "gen_ai.provider.name",
                                          "gen_ai.request.model")
#: the judge asks for chat completions over OpenAI's API (the conventions' name for any server speaking it)
JUDGE_OPERATION, JUDGE_PROVIDER = "chat", "openai"
#: scores lie in [0, 1]: the default buckets (0, 5, 10, ..., 10000) would put them all in one
SCORE_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
#: seconds per record: an offline metric takes under a millisecond to a few, a judge seconds to a minute
DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                    5.0, 10.0, 30.0, 60.0, 120.0)
#: the boundaries the GenAI conventions give gen_ai.client.token.usage
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
MAX_LANGUAGES = 16
_CODE = re.compile(r"[a-z]{2,3}")


class Instruments:
    """groundtrace's instruments on one MeterProvider, shared by every Monitor that records there (two
    sets of the same names on one provider would report each series twice)."""

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("groundtrace")
        self._series: list[MonitorSeries] = []
        self._languages: set[str] = set()
        self._attributes: dict[tuple[str, ...], dict[str, str]] = {}
        self._lock = threading.Lock()
        self.score = meter.create_histogram(
            SCORE, unit="1", explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
            description="Evaluation scores in [0, 1], per metric (higher is better for grounding metrics)")
        self.duration = meter.create_histogram(
            DURATION, unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            description="Seconds from a worker taking a record to its Scores")
        # upstream's description word for word: the application's GenAI instrumentation may record on the same
        # name, and the Prometheus exporter writes one family only where name, unit and description agree
        self.tokens = meter.create_histogram(
            TOKENS, unit="{token}", explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            description="Number of input and output tokens used.")
        # a guard's decisions, recorded on the application's thread as it decides (an add: no lock of ours)
        self.guard_decisions = meter.create_counter(
            GUARD_DECISIONS, unit="{answer}",
            description="Answers a guard checked, by action (passed, flagged, redacted, replaced, reasked, raised, "
                        "unchecked) and whether the check ran past its budget")
        self.guard_duration = meter.create_histogram(
            GUARD_DURATION, unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            description="Seconds the caller waited for a guard's check")
        meter.create_observable_counter(EVALUATIONS, [self._evaluations], unit="{evaluation}",
                                        description="Metric results by outcome: flagged, passed, error")
        for field, description in HEALTH_COUNTERS:
            meter.create_observable_counter(f"groundtrace.monitor.{field}", [self._counter(field)], unit="{record}",
                                            description=description)
        meter.create_observable_gauge(QUEUED, [self._queued], unit="{record}",
                                      description="Records waiting for a worker or being scored")
        meter.create_observable_gauge(WORKERS, [self._workers], unit="{worker}",
                                      description="Worker threads alive (0: the Monitor stopped)")
        meter.create_observable_gauge(LAST_PROGRESS, [self._last_progress], unit="s",
                                      description="Unix time a worker last took or settled a record")
        meter.create_observable_counter(CPU, [self._cpu], unit="s", description="CPU seconds groundtrace used")
        meter.create_observable_counter(COST, [self._cost], unit="{USD}", description="Judge spend in US dollars")

    # ------------------------------------------------------------------------------ per record
    def attach(self, series: MonitorSeries) -> None:
        with self._lock:
            self._series.append(series)

    def recorded(self) -> bool:
        """Whether any Monitor recording here was offered a record (a --preload master never is)."""
        with self._lock:
            series = list(self._series)
        return any(s.counts.submitted for s in series)

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
        key = ("score", metric, label, language)
        found = self._attributes.get(key)
        if found is None:  # bounded: metrics x 3 labels x (MAX_LANGUAGES + 2)
            found = self._attributes[key] = {METRIC: metric, LABEL: label, LANGUAGE: language}
        return found

    def token_attributes(self, metric: str, kind: str, model: str | None) -> dict[str, str]:
        """gen_ai.client.token.usage's attributes, with the evaluation's name so that the judge's tokens stand
        apart from the application's own model calls on the same instrument."""
        key = ("tokens", metric, kind, model or "")
        found = self._attributes.get(key)
        if found is None:  # bounded: metrics x 2 types x the judge models configured
            found = {OPERATION: JUDGE_OPERATION, PROVIDER: JUDGE_PROVIDER, TOKEN_TYPE: kind, METRIC: metric}
            if model:
                found[MODEL] = model
            self._attributes[key] = found
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
            yield Observation(value, dict(zip(names, key, strict=True)))

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

    def _last_progress(self, options: CallbackOptions) -> Iterator[Observation]:
        """The Monitor furthest behind: of those with records waiting, the oldest progress; when none wait,
        the newest of all (an idle Monitor is not stuck, and `time() - this` then reads its idle time)."""
        series = self._all()
        if series:
            waiting = [s.last_progress for s in series if s.queued()]
            yield Observation(min(waiting) if waiting else max(s.last_progress for s in series))

    def _cpu(self, options: CallbackOptions) -> Iterator[Observation]:
        return self._by(lambda s: [((), s.counts.cpu_s)], ())

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
            found = _by_provider[id(provider)] = (provider, Instruments(provider))
        return found[1]


__all__ = ["COST", "CPU", "DURATION", "DURATION_BUCKETS", "EVALUATIONS", "GUARD_ACTION", "GUARD_DECISIONS",
           "GUARD_DURATION", "GUARD_TIMED_OUT", "HEALTH_COUNTERS", "Instruments",
           "LAST_PROGRESS", "OUTCOMES", "QUEUED", "SCORE", "SCORE_BUCKETS", "TOKENS", "TOKEN_BUCKETS", "WORKERS",
           "instruments_for"]
