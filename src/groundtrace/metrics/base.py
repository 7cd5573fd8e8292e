"""The metric interface: a small class that turns a Record into a Score and never raises."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from groundtrace._extras import MissingExtraError, ModelUnavailableError
from groundtrace.backends.breaker import CircuitOpen
from groundtrace.record import NO_TEXT, InvalidRecord, Record, coerce_record, salvage_id
from groundtrace.redaction import get_logger
from groundtrace.score import Cost, Score, Span
from groundtrace.text.lang import guess_language

log = get_logger("groundtrace.metrics")

_FIELD_HINTS = {
    "answer": "the generated answer",
    "contexts": "the retrieved passages",
    "question": "the user's question",
    "reference": "a reference (gold) answer",
}


T = TypeVar("T")


class CannotScore(Exception):
    """Raised by a metric's compute() for a record it cannot score for a reason it can state (every
    component of a combination failed): an error Score with that reason, no traceback logged."""


def needed(value: T | None) -> T:
    """A field of the record that :meth:`Metric.check` found there, as its type: ``needed(record.answer)``
    in a metric that lists ``answer`` in ``requires``. A field the metric does not list raises (which
    :meth:`Metric.score` turns into an error Score naming the metric's bug)."""
    if value is None:
        raise ValueError("the metric reads a field of the record that its `requires` does not list")
    return value


@dataclass
class Result:
    """What a metric computes; the base class turns it into a Score."""

    value: float
    reason: str
    spans: list[Span] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    cost: Cost | None = None


class Metric:
    """Base class of every metric.

    Subclasses set the class attributes and implement :meth:`compute`. ``hallucinated`` is
    ``value < threshold`` for a metric where higher is better, ``value >= threshold`` otherwise.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ("answer", "contexts")
    higher_is_better: ClassVar[bool]
    default_threshold: ClassVar[float]
    # Inputs beyond these sizes get an error Score instead of minutes of work: a RAG answer of
    # 100,000 characters is a bug upstream, not an answer.
    default_max_answer_chars: ClassVar[int] = 100_000
    default_max_context_chars: ClassVar[int] = 1_000_000
    # True for metrics that mostly wait on a network endpoint (the LLM judges): the Ray engine's
    # actors run them for many records at once, under a bound, instead of one record at a time.
    waits_on_io: ClassVar[bool] = False

    def __init__(
        self,
        *,
        threshold: float | None = None,
        max_answer_chars: int | None = None,
        max_context_chars: int | None = None,
    ) -> None:
        self.threshold = self.documented_threshold() if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"{self.name}: threshold must lie in [0, 1], got {self.threshold}")
        self.max_answer_chars = max_answer_chars or self.default_max_answer_chars
        self.max_context_chars = max_context_chars or self.default_max_context_chars

    # ------------------------------------------------------------------ what subclasses implement
    def compute(self, record: Record, language: str) -> Result:
        raise NotImplementedError

    def preflight(self) -> None:
        """Raise, with a message that says what to do, when this metric cannot run at all here (a model that
        is not on this machine and may not be downloaded, a missing extra). Cheap: loads nothing. The batch
        engines ask before the first record (groundtrace.batch.stream); the Monitor asks when its workers start, says
        once what failed, and every record gets it as its error Score: the application sees nothing."""

    def prepare(self) -> None:
        """Load what the first record would (a model), raising the metric's one clear error when that cannot
        be done. The local batch engine calls it after :meth:`preflight`."""

    def warm_up(self) -> None:
        """:meth:`prepare`, for a Monitor worker, a scoring process or a Ray actor: the model loads when it
        starts rather than inside a record's time budget. A failure is not raised here: it is logged once, and
        the records get it as their error Score."""
        try:
            self.prepare()
        except Exception as error:
            self._warn_once(str(error))

    # ------------------------------------------------------------------------------- public API
    def score(self, record: Record | Any) -> Score:
        """Score one record. Never raises: every failure becomes an error Score with a reason."""
        started = time.perf_counter()
        try:
            record = coerce_record(record)
        except InvalidRecord as error:
            return self.error(f"invalid record: {error}", salvage_id(record), started)
        problem = self.check(record)
        if problem:
            return self.error(problem, record.id, started)
        language = record.language or guess_language(record.answer or record.context_text())
        try:
            result = self.run_compute(record, language)
        except (MissingExtraError, ModelUnavailableError) as error:  # what to install or download: no traceback
            self._warn_once(str(error))
            return self.error(str(error), record.id, started)
        except (CannotScore, CircuitOpen) as error:
            return self.error(str(error), record.id, started)
        except Exception as error:  # a metric bug must not take the batch or the app down
            self._log_failure(error, record.id)
            return self.error(f"{type(error).__name__}: {error}", record.id, started)
        if not isinstance(result.value, (int, float)) or not math.isfinite(result.value):
            return self.error(f"the metric computed an invalid value ({result.value!r})", record.id, started)
        value = min(max(float(result.value), 0.0), 1.0)
        return Score(
            metric=self.name,
            value=value,
            higher_is_better=self.higher_is_better,
            hallucinated=self.verdict(value),
            threshold=self.threshold,
            reason=result.reason,
            spans=result.spans,
            details={"language": language, **result.details},
            latency_ms=_elapsed_ms(started),
            cost=result.cost,
            record_id=record.id,
        )

    async def ascore(self, record: Record | Any) -> Score:
        """Score one record without blocking the event loop."""
        return await asyncio.to_thread(self.score, record)

    def run_compute(self, record: Record, language: str) -> Result:
        """:meth:`compute`, where a metric that calls a backend that can fail adds its circuit breaker."""
        return self.compute(record, language)

    def _log_failure(self, error: Exception, record_id: str | None) -> None:
        """A failure of the metric's own: its traceback once per kind of exception (the Score says it for
        every record), then a DEBUG line per record: a metric that fails on every record logs one ERROR."""
        logged = self.__dict__.setdefault("_logged_failures", set())
        if type(error) in logged:
            log.debug("metric %s failed on record %s: %s", self.name, record_id, type(error).__name__)
            return
        logged.add(type(error))
        log.exception("metric %s failed on record %s (said once per kind of failure; every record's Score says it)",
                      self.name, record_id)

    def _warn_once(self, message: str) -> None:
        warned = self.__dict__.setdefault("_warned", set())
        if message not in warned:
            warned.add(message)
            log.warning("metric %s cannot score: %s", self.name, message)

    @classmethod
    def documented_threshold(cls) -> float:
        """The threshold used when none is given (a trained metric reads it from its model card)."""
        return cls.default_threshold

    @classmethod
    def numerics(cls) -> tuple[float, list[str]] | None:
        """(tolerance, instruction sets measured on): how far this metric's values may differ between CPUs,
        where it states it (a trained metric, from its model card); None where it does not."""
        return None

    def verdict(self, value: float, threshold: float | None = None) -> bool:
        """Hallucinated at ``threshold`` (default: this metric's own)?"""
        t = self.threshold if threshold is None else threshold
        return value < t if self.higher_is_better else value >= t

    def check(self, record: Record) -> str | None:
        """Why this record cannot be scored, or None."""
        for name in self.requires:
            if getattr(record, name) is None:
                hint = _FIELD_HINTS.get(name, name)
                return f"the record has no '{name}' ({hint}), which metric '{self.name}' needs"
        answer, contexts = record.answer, record.contexts  # present where required (the loop above)
        if "contexts" in self.requires and not contexts and (why := record.metadata.get(NO_TEXT)):
            return f"no contexts to check the answer against: {why}"
        if "answer" in self.requires and answer is not None:
            if not answer.strip():
                return "the answer is empty: there is no text to score (did the application return nothing?)"
            if len(answer) > self.max_answer_chars:
                return (
                    f"the answer has {len(answer):,} characters, more than this metric's limit of "
                    f"{self.max_answer_chars:,}; raise max_answer_chars if this is intended"
                )
        if "contexts" in self.requires and contexts is not None:
            total = sum(map(len, contexts))
            if total > self.max_context_chars:
                return (
                    f"the contexts have {total:,} characters, more than this metric's limit of "
                    f"{self.max_context_chars:,}; raise max_context_chars if this is intended"
                )
        return None

    @classmethod
    def error(cls, message: str, record_id: str | None = None, started: float | None = None) -> Score:
        """An error Score; a classmethod, so a driver that never loads the metric (the Ray engine's,
        for a record its actors could not score) still makes the same Score."""
        return Score(
            metric=cls.name,
            value=None,
            higher_is_better=cls.higher_is_better,
            error=message,
            reason=message,
            latency_ms=_elapsed_ms(started) if started is not None else None,
            record_id=record_id,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold})"


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
