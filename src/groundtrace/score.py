"""Score: what a metric says about one Record.

A Score carries its own direction (``higher_is_better``) so that nobody downstream has to remember
which metric counts up and which counts down, and a verdict (``hallucinated``) that comes from the
metric's documented threshold, never from a caller's magic number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from groundtrace.record import Record
from groundtrace.redaction import redact_optional


class Span(BaseModel):
    """A piece of the answer that a metric points at: [start, end) character offsets."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    text: str
    label: str = "unsupported"
    score: float | None = Field(default=None, ge=0.0, le=1.0, description="the metric's confidence, where it has one")

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError(f"span end {self.end} is before its start {self.start}")
        return self


class Cost(BaseModel):
    """Tokens and money spent to compute a Score (zero for offline metrics)."""

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = None


class Score(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str
    value: float | None = Field(default=None, description="in [0, 1]; None when the metric failed (see error)")
    higher_is_better: bool
    hallucinated: bool | None = None
    threshold: float | None = Field(default=None, description="the threshold that produced `hallucinated`")
    reason: str = ""
    spans: list[Span] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    latency_ms: float | None = None
    cost: Cost | None = None
    error: str | None = None
    record_id: str | None = None

    @field_validator("reason", "error")
    @classmethod
    def _redacted(cls, text: str | None) -> str | None:
        # every reason and error that leaves in a Score passes the one redaction step, whoever made it
        return redact_optional(text)

    @field_validator("value")
    @classmethod
    def _finite_unit_interval(cls, value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value):
            raise ValueError(f"a score value must be a finite number, got {value}")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"a score value must lie in [0, 1], got {value}")
        return float(value)

    @property
    def ok(self) -> bool:
        return self.error is None and self.value is not None

    def flagged_text(self) -> str:
        """The text of its spans, each quoted, for a message: '"2 500 рублей"; "built in 1850"' ('' if none)."""
        return "; ".join(json.dumps(span.text, ensure_ascii=False) for span in self.spans)

    def explain(self) -> str:
        """Value, threshold, verdict, reason and flagged text, in lines a person reads (a test failure,
        an evaluator's feedback)."""
        if not self.ok:
            return f"{self.metric}: could not score: {self.error or 'the metric returned no value'}"
        rule = "no threshold" if self.threshold is None else \
            f"threshold {self.threshold:g}: flagged when {'<' if self.higher_is_better else '>='} {self.threshold:g}"
        verdict = {True: "flagged", False: "not flagged", None: "no verdict"}[self.hallucinated]
        lines = [f"{self.metric} = {self.value:.3f} ({rule}): {verdict}",
                 f"reason: {self.reason or '-'}"]
        if self.spans:
            lines.append(f"flagged text: {self.flagged_text()}")
        return "\n".join(lines)

    @property
    def hallucination_score(self) -> float | None:
        """The value oriented so that higher always means more hallucinated."""
        if self.value is None:
            return None
        return self.value if not self.higher_is_better else 1.0 - self.value


class ScoredRecord(BaseModel):
    """One output line of ``groundtrace score``: the record and every Score it got."""

    id: str | None = None
    record: Record
    scores: list[Score] = Field(default_factory=list)

    @model_validator(mode="after")
    def _carry_id(self) -> ScoredRecord:
        if self.id is None:
            self.id = self.record.id
        return self

    def score(self, metric: str) -> Score | None:
        return next((s for s in self.scores if s.metric == metric), None)


def scores_by_id(rows: Iterable[ScoredRecord]) -> dict[str, dict[str, Score]]:
    """Scored records (a scores file read by groundtrace.io.read_scored): record id -> metric -> Score."""
    return {str(row.id): {score.metric: score for score in row.scores} for row in rows}
