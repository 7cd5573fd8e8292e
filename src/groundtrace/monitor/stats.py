"""MonitorStats: the Monitor's counters; every submitted record ends in exactly one bucket."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class MonitorStats:
    submitted: int = 0
    sampled_out: int = 0
    excluded: int = 0
    #: not taken because groundtrace had used its CPU budget (Monitor(cpu_budget=...))
    over_budget: int = 0
    dropped: int = 0
    scored: int = 0
    failed: int = 0
    sink_errors: int = 0
    #: answers (scored or failed) that at least one metric flagged as hallucinated
    flagged: int = 0
    #: turns an integration (or groundtrace.turn) saw end with no Record to submit (never submitted, so not in
    #: ``settled``): the capture's ``stats().no_record`` says why, per reason
    no_record: int = 0
    queued: int = 0
    #: CPU seconds groundtrace's workers used: their threads in this process (metrics' too, for
    #: isolation "thread") and their scoring processes (for "ray", the threads here only)
    cpu_s: float = 0.0
    latency_ms_p50: float | None = None
    latency_ms_p95: float | None = None

    @property
    def settled(self) -> int:
        return self.sampled_out + self.excluded + self.over_budget + self.dropped + self.scored + self.failed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
