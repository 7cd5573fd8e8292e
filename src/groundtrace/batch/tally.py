"""A running tally of scored records: what the command line's summary needs, in constant memory.

A backfill of a million records must not keep a million ScoredRecords for one table at the end:
each record is counted as it passes, and only the first ``keep`` are kept (for the per-record
table), without their contexts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from groundtrace.record import Record
from groundtrace.score import ScoredRecord

#: distinct error messages counted per metric; later new ones are not (constant memory over a million records,
#: and an outage's message is among the first)
DISTINCT_ERRORS = 50


@dataclass
class MetricTally:
    higher_is_better: bool
    records: int = 0
    errors: int = 0
    value_sum: float = 0.0
    flagged: int = 0
    latency_sum_ms: float = 0.0
    latency_count: int = 0
    first_error: str | None = None  # what went wrong, said once in the summary instead of only in the file
    error_counts: Counter[str] = field(default_factory=Counter)  # message -> records, the first DISTINCT_ERRORS

    @property
    def all_failed(self) -> bool:
        """The metric scored none of its records (a judge that is down, a model that cannot load)."""
        return self.records > 0 and self.errors == self.records

    @property
    def most_common_error(self) -> tuple[str, int] | None:
        """The message most records failed with, and how many; None when none failed."""
        found = self.error_counts.most_common(1)
        return found[0] if found else None

    @property
    def ok(self) -> int:
        return self.records - self.errors

    @property
    def mean(self) -> float | None:
        return self.value_sum / self.ok if self.ok else None

    @property
    def mean_latency_ms(self) -> float | None:
        return self.latency_sum_ms / self.latency_count if self.latency_count else None


@dataclass
class Tally:
    keep: int = 0
    count: int = 0
    metrics: dict[str, MetricTally] = field(default_factory=dict)  # in the order metrics first appear
    kept: list[ScoredRecord] = field(default_factory=list)

    @classmethod
    def of(cls, rows: Iterable[ScoredRecord], keep: int = 0) -> Tally:
        tally = cls(keep=keep)
        for row in rows:
            tally.add(row)
        return tally

    def add(self, row: ScoredRecord) -> None:
        self.count += 1
        for score in row.scores:
            metric = self.metrics.setdefault(score.metric, MetricTally(score.higher_is_better))
            metric.records += 1
            if score.ok and score.value is not None:  # ok: a value and no error
                metric.value_sum += score.value
                metric.flagged += bool(score.hallucinated)
            else:
                metric.errors += 1
                message = score.error or "the metric returned no value"
                if metric.first_error is None:
                    metric.first_error = message
                if message in metric.error_counts or len(metric.error_counts) < DISTINCT_ERRORS:
                    metric.error_counts[message] += 1
            if score.latency_ms is not None:
                metric.latency_sum_ms += score.latency_ms
                metric.latency_count += 1
        if len(self.kept) < self.keep:  # the per-record table shows the answer, never the contexts
            self.kept.append(ScoredRecord(record=Record(id=row.id, answer=row.record.answer), scores=row.scores))
