"""What the Monitor's metrics need of one record's Scores, small enough to cross the scoring process's pipe.

The Scores themselves come back to the application's process only when it has sinks of its own (and
parsing them costs far more than counting them), so the scoring process sends this summary instead: the
record's language and, per metric in the Monitor's order, the value, the verdict and the judge's tokens
and spend. In thread or Ray isolation it is made here, from the Scores, by the same function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from groundtrace.record import Record
from groundtrace.score import Score

FLAGGED, PASSED, ERROR = "flagged", "passed", "error"
OUTCOMES = (FLAGGED, PASSED, ERROR)


@dataclass(slots=True)
class Result:
    """One metric's Score, reduced: ``value`` None when it failed; ``hallucinated`` its verdict."""

    value: float | None
    hallucinated: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0

    @property
    def outcome(self) -> str:
        """flagged, passed or error; a Score with a value and no verdict (no threshold) passed."""
        if self.value is None:
            return ERROR
        return FLAGGED if self.hallucinated else PASSED

    @property
    def label(self) -> str:
        """The verdict as the otel sink labels it: hallucinated, grounded or unknown."""
        return "unknown" if self.hallucinated is None else "hallucinated" if self.hallucinated else "grounded"


@dataclass(slots=True)
class Evaluations:
    language: str | None
    results: list[Result] = field(default_factory=list)

    def encode(self) -> bytes:
        """One token without spaces, for the scoring process's outcome line."""
        rows = [[r.value, r.hallucinated, r.input_tokens, r.output_tokens, r.usd] for r in self.results]
        # no space outside strings with these separators; one inside a string is escaped, as JSON allows
        return json.dumps([self.language, rows], separators=(",", ":")).replace(" ", "\\u0020").encode()

    @classmethod
    def decode(cls, token: bytes) -> Evaluations:
        language, rows = json.loads(token)
        return cls(language, [Result(*row) for row in rows])


def summarize(record: Record, scores: list[Score]) -> Evaluations:
    """The summary of one record's Scores. The language is the record's, else the one the first metric
    guessed (the metrics' base class keeps it in its Score's details): no second guess here."""
    language = record.language
    results = []
    for score in scores:
        if language is None:
            guessed = score.details.get("language")
            language = guessed if isinstance(guessed, str) else None
        cost = score.cost
        results.append(Result(
            score.value if score.ok else None, score.hallucinated if score.ok else None,
            cost.input_tokens if cost else 0, cost.output_tokens if cost else 0,
            (cost.usd or 0.0) if cost else 0.0))
    return Evaluations(language, results)


def failed(count: int, language: str | None = None) -> Evaluations:
    """The summary of ``count`` error Scores (a record no scoring process took)."""
    return Evaluations(language, [Result(None) for _ in range(count)])
