"""What a guard decided for one answer: the action, the verdict, the Scores and spans it rests on, the text it
delivered and the time it took; and the exception the ``raise`` policy raises with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from groundtrace.errors import GroundtraceError
from groundtrace.score import Score, Span

#: what a guard can do with an answer
Action = Literal["passed", "flagged", "redacted", "replaced", "reasked", "raised", "unchecked"]


@dataclass(frozen=True)
class Decision:
    """One answer's decision. ``hallucinated`` is the verdict (None when the check did not finish in the budget,
    or failed: then ``action`` is "unchecked", or "replaced" where ``on_timeout="fallback"``)."""

    action: Action
    hallucinated: bool | None
    text: str  # what reached the caller
    scores: list[Score] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)  # the unsupported spans of the answer checked
    seconds: float = 0.0  # time the caller waited for the guard
    reason: str = ""
    answer: str = ""  # the answer as the model wrote it (the last one, after a reask)
    reasked_from: str | None = None  # the model's first answer, when it was asked again

    def summary(self) -> dict[str, Any]:
        """What a Record delivered to staging says of its guard (``metadata["guard"]``): review and report
        filter by its action."""
        return {"action": self.action, "hallucinated": self.hallucinated, "seconds": round(self.seconds, 4)}

    @property
    def blocked(self) -> bool:
        """Did the caller get something other than the model's answer?"""
        return self.action in ("redacted", "replaced", "reasked", "raised")


class GuardBlocked(GroundtraceError, RuntimeError):
    """Raised by a guard whose policy is ``raise`` when the answer is not supported; ``decision`` says why."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(f"groundtrace guard: the answer is not supported by the contexts: {decision.reason}")
        self.decision = decision
