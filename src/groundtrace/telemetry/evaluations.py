"""What the Monitor's metrics need of one record's Scores, small enough to cross the scoring process's pipe.

The Scores themselves come back to the application's process only when it has sinks of its own (and
parsing them costs far more than counting them), so the scoring process sends this summary instead: the
record's language and, per metric in the Monitor's order, the value, the verdict, the judge's tokens,
spend and model. In thread or Ray isolation it is made here, from the Scores, by the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from groundtrace.record import Record
from groundtrace.score import Score

FLAGGED, PASSED, ERROR = "flagged", "passed", "error"
OUTCOMES = (FLAGGED, PASSED, ERROR)


@dataclass(slots=True)
class Result:
    """One metric's Score, reduced: ``value`` None when it failed; ``hallucinated`` its verdict; ``model``
    the judge's, for a judge metric."""

    value: float | None
    hallucinated: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    model: str | None = None

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
        """One token without spaces for the scoring process's outcome line, read back by split() (a third of
        json.loads's time, paid per record by the application's process):
        ``language;value,verdict,in,out,usd,model;...`` (value and model empty when there is none, verdict 1, 0
        or -; repr() gives floats back exactly)."""
        fields = [(self.language or "").translate(_UNSAFE)]
        for r in self.results:
            value = "" if r.value is None else repr(r.value)
            model = (r.model or "").translate(_UNSAFE)
            fields.append(f"{value},{_VERDICT[r.hallucinated]},{r.input_tokens},{r.output_tokens},{r.usd!r},{model}")
        return ";".join(fields).encode()

    @classmethod
    def decode(cls, token: bytes) -> Evaluations:
        language, *rows = token.decode().split(";")
        results = []
        for row in rows:
            value, verdict, input_tokens, output_tokens, usd, model = row.split(",")
            results.append(Result(float(value) if value else None, _VERDICT_OF[verdict], int(input_tokens),
                                  int(output_tokens), float(usd), model or None))
        return cls(language or None, results)


_VERDICT = {True: "1", False: "0", None: "-"}
_VERDICT_OF = {text: verdict for verdict, text in _VERDICT.items()}
#: what would break the token apart: a language code holds none of it (a malformed one is "other" anyway),
#: a model name hardly ever
_UNSAFE = str.maketrans({";": "_", ",": "_", " ": "_", "\n": "_"})


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
            (cost.usd or 0.0) if cost else 0.0, judge_model(score)))
    return Evaluations(language, results)


def judge_model(score: Score) -> str | None:
    """The model a judge metric asked (its Score's ``details["judge"]["model"]``), else None."""
    judge = score.details.get("judge")
    model = judge.get("model") if isinstance(judge, dict) else None
    return model if isinstance(model, str) and model else None


def failed(count: int, language: str | None = None) -> Evaluations:
    """The summary of ``count`` error Scores (a record no scoring process took)."""
    return Evaluations(language, [Result(None) for _ in range(count)])
