"""`combined`: one calibrated probability that the answer is unsupported, from several metrics' values.

The verdict file (``groundtrace fit`` writes one; groundtrace ships one fitted on its shared data)
names the component metrics and a logistic model over their values; this metric runs the components,
and its value is the model's probability, flagged at the file's threshold:

    h_i    = component i's hallucination-oriented value (1 - value where higher is better)
    x_i    = log(h_i / (1 - h_i)), h clipped to [1e-4, 1 - 1e-4]; a failed component: its fit mean
    value  = sigmoid(intercept + offset[language] + sum_i coef_i * (x_i - mean_i) / scale_i)
    spans  = the union of the components' spans

With a cascade in the file, a record whose value falls in the file's band is sent to the costly
metric it names (a judge, a Hub detector) and decided by the file's second model, which reads that
metric's value beside the others, within a spend budget (``budget_usd_per_hour``).

The file is read once, where the metric is built; a Monitor's scoring process is handed the verdict so read
(:meth:`CombinedMetric.spec_options`), so the threshold the Monitor shows is the one every Score was made with,
whatever later rewrites the file: a new verdict takes effect when the application restarts. Each Score's
details carry the file's name and the SHA-256 of what was read (``file_sha256``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundtrace.backends.verdict import Contribution, VerdictFileError, VerdictModel
from groundtrace.config import verdict_file
from groundtrace.metrics.base import CannotScore, Metric, Result
from groundtrace.record import Record
from groundtrace.score import Score, Span

DEFAULT_FILE = Path(__file__).resolve().parents[1] / "backends" / "default-verdict.json"


class CombinedMetric(Metric):
    name = "combined"
    description = ("One calibrated probability that the answer is unsupported, combining several metrics "
                   "(fitted to labels with `groundtrace fit`), with the union of their spans.")
    requires = ("answer", "contexts")
    higher_is_better = False
    default_threshold = 0.5  # never used: the verdict file's threshold is

    def __init__(self, *, file: str | Path | None = None, escalate: bool = True, budget_usd_per_hour: float | None = None,
                 threshold: float | None = None, verdict: dict[str, Any] | None = None, sha256: str | None = None,
                 **options: Any) -> None:
        """``verdict`` (with ``sha256``): the verdict as another process read it from ``file`` (see
        :meth:`spec_options`); the file itself is then not read again."""
        self.file = Path(file or verdict_file() or DEFAULT_FILE)
        if verdict is not None:
            self.combination, self.sha256 = VerdictModel.from_raw(verdict, self.file), str(sha256 or "")
        else:  # a VerdictFileError names the file and the fix
            self.combination, self.sha256 = VerdictModel.load_with_hash(self.file)
        super().__init__(threshold=self.combination.threshold if threshold is None else threshold, **options)
        from groundtrace.metrics import get_metric

        def component(name: str, options: dict[str, Any]) -> Metric:
            try:
                return get_metric(name, **options)
            except KeyError as error:  # a metric of another installation (a plugin not installed here)
                reason = error.args[0] if error.args else error
                raise VerdictFileError(f"verdict file {self.file} combines metric {name!r}, which this installation does "
                                       f"not have ({reason}): install the package that provides it, or fit a verdict "
                                       "of the metrics installed here") from None

        self.components = [component(c.metric, c.options) for c in self.combination.components]
        cascade = self.combination.cascade
        self.costly = component(cascade.metric, cascade.options) if cascade is not None and escalate else None
        self.budget = SpendBudget(budget_usd_per_hour)

    def spec_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options another process (a Monitor's scoring process) rebuilds this metric from: ``options`` and the
        verdict as read here, so the file is not read again there (a file rewritten meanwhile is not applied)."""
        return {**options, "file": str(self.file), "verdict": self.combination.to_dict(), "sha256": self.sha256}

    @classmethod
    def documented_threshold(cls) -> float:
        """The threshold of the verdict file in use (GROUNDTRACE_VERDICT_FILE, else the shipped one)."""
        try:
            return VerdictModel.load(verdict_file() or DEFAULT_FILE).threshold
        except VerdictFileError:  # said when the metric is built; a listing shows the class default
            return cls.default_threshold

    @property
    def trained_on(self) -> list[dict[str, str]]:
        """The files the verdict was fitted on (the bench marks its numbers on them as in-sample)."""
        return list(self.combination.fitted.get("trained_on", []))

    def preflight(self) -> None:
        for metric in self._metrics():
            metric.preflight()

    def prepare(self) -> None:
        for metric in self._metrics():
            metric.prepare()

    def _metrics(self) -> list[Metric]:
        return [*self.components, *([self.costly] if self.costly is not None else [])]

    def compute(self, record: Record, language: str) -> Result:
        scores = [metric.score(record) for metric in self.components]
        failed = [s for s in scores if not s.ok]
        if len(failed) == len(scores):
            raise CannotScore("every component failed: " + "; ".join(f"{s.metric}: {s.error}" for s in failed))
        values = {s.metric: s.hallucination_score for s in scores}
        probability, parts = self.combination.model.probability(values, language)
        details: dict[str, Any] = {"file": self.file.name, "file_sha256": self.sha256, "cheap_probability": round(probability, 6),
                                   "components": {s.metric: _component(s) for s in scores}}
        cost = None
        note = ""
        cascade = self.combination.cascade
        if cascade is not None and cascade.covers(probability):
            details["escalated"] = False
            if self.costly is None:
                note = f"; in the band for {cascade.metric}, not escalated (escalate=false)"
            elif not self.budget.allows():
                note = f"; in the band for {cascade.metric}, not escalated: the spend budget of this hour is used up"
            else:
                costly = self.costly.score(record)
                self.budget.spend(costly.cost.usd if costly.cost is not None and costly.cost.usd else 0.0)
                details["components"][costly.metric] = _component(costly)
                cost = costly.cost
                if costly.ok:
                    values[costly.metric] = costly.hallucination_score
                    probability, parts = cascade.model.probability(values, language)
                    details["escalated"] = True
                    scores.append(costly)
                else:
                    note = f"; {cascade.metric} could not decide ({costly.error}): the cheap signals did"
        details["probability"] = round(probability, 6)
        flagged = probability >= self.threshold
        # an unsupported verdict points at what its drivers point at; a supported one at nothing
        drivers = {c.metric for c in parts if c.weight > 0} if flagged else set()
        own = {s.metric: s.value for s in scores}
        return Result(value=probability, reason=self._reason(probability, parts, own, failed) + note,
                      spans=_union([s for s in scores if s.metric in drivers]), details=details, cost=cost)

    def _reason(self, probability: float, parts: list[Contribution], own: dict[str, float | None],
                failed: list[Score]) -> str:
        verdict = "unsupported" if probability >= self.threshold else "supported"
        ranked = sorted(parts, key=lambda c: -abs(c.weight))
        drivers = ", ".join(f"{c.metric} {_shown(own.get(c.metric))} ({c.weight:+.2f})" for c in ranked)
        text = (f"{verdict}: probability {probability:.2f} of unsupported content (threshold {self.threshold:.2f}); "
                f"what moved its log-odds from the fit's average answer: {drivers}")
        if failed:
            text += "; " + "; ".join(f"{s.metric} failed ({s.error}), its mean stood in" for s in failed)
        return text


class SpendBudget:
    """Dollars a cascade may spend on its costly metric per rolling hour (None: no bound)."""

    def __init__(self, usd_per_hour: float | None) -> None:
        self.usd_per_hour = usd_per_hour
        self._spent: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def allows(self) -> bool:
        if self.usd_per_hour is None:
            return True
        with self._lock:
            hour_ago = time.monotonic() - 3600.0
            self._spent = [(t, usd) for t, usd in self._spent if t >= hour_ago]
            return sum(usd for _, usd in self._spent) < self.usd_per_hour

    def spend(self, usd: float) -> None:
        if self.usd_per_hour is not None and usd > 0:
            with self._lock:
                self._spent.append((time.monotonic(), usd))


def _component(score: Score) -> dict[str, Any]:
    return {"value": score.value, "hallucinated": score.hallucinated, "error": score.error}


def _shown(value: float | None) -> str:
    return "failed" if value is None else f"{value:.2f}"


def _union(scores: list[Score]) -> list[Span]:
    """Every component's spans, overlapping ones merged (the widest text kept)."""
    spans = sorted((span for s in scores if s.ok for span in s.spans), key=lambda span: (span.start, -span.end))
    merged: list[Span] = []
    for span in spans:
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            if span.end > last.end:
                text = last.text + span.text[last.end - span.start:]
                merged[-1] = Span(start=last.start, end=span.end, text=text, label=last.label,
                                  score=max(filter(None, (last.score, span.score)), default=None))
            continue
        merged.append(span)
    return merged
