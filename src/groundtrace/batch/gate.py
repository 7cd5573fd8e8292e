"""The CI gate of ``groundtrace score --max-flagged METRIC=SHARE``: fail the build when more than SHARE
of the scored records are flagged by METRIC.

A record the metric could not score (an error Score: a missing field, an empty answer, a judge that
is down) counts against the gate like a flagged one: a gate that passes because nothing could be
scored would be no gate. A metric that scored no record at all fails its gate for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from groundtrace.batch.tally import MetricTally, Tally


@dataclass(frozen=True)
class Gate:
    metric: str
    max_share: float

    @classmethod
    def parse(cls, spec: str) -> Gate:
        """``grounding=0.1`` or ``grounding=10%``."""
        metric, sep, raw = spec.partition("=")
        metric, raw = metric.strip(), raw.strip()
        if not sep or not metric or not raw:
            raise ValueError(f"--max-flagged {spec!r} is not METRIC=SHARE (e.g. grounding=0.1 or grounding=10%)")
        try:
            share = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ValueError(f"--max-flagged {spec!r}: {raw!r} is not a share (a number in [0, 1], or a percentage)") from None
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"--max-flagged {spec!r}: the share must lie in [0, 1] (or 0% to 100%), got {raw}")
        return cls(metric, share)

    def check(self, tally: Tally) -> GateResult:
        counts = tally.metrics.get(self.metric) or MetricTally(higher_is_better=True)
        return GateResult(self, counts.records, counts.flagged, counts.errors)


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    records: int
    flagged: int
    unscorable: int

    @property
    def failing(self) -> int:
        return self.flagged + self.unscorable

    @property
    def share(self) -> float | None:
        return self.failing / self.records if self.records else None

    @property
    def passed(self) -> bool:
        return self.share is not None and self.share <= self.gate.max_share

    def line(self) -> str:
        allowed = f"{self.gate.max_share:.1%}"
        if self.share is None:
            return f"gate failed: {self.gate.metric} scored no record (allowed flagged share {allowed})"
        verdict = "gate passed" if self.passed else "gate failed"
        relation = "at most" if self.passed else "more than"
        return (f"{verdict}: {self.gate.metric} flagged {self.failing} of {self.records} records ({self.share:.1%}: "
                f"{self.flagged} flagged, {self.unscorable} could not be scored), {relation} the allowed {allowed}")

