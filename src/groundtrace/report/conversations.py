"""The report's conversations: the records grouped by their session_id, each with its turns and how
many of them each metric flagged, so a conversation that keeps going wrong stands out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groundtrace.score import ScoredRecord


@dataclass
class Conversation:
    session_id: str
    first: int  # the index of its first turn in the report
    turns: int = 0
    flagged_turns: int = 0  # turns some metric flagged
    # metric -> [flagged, scored] over the turns (a failed score is not scored)
    metrics: dict[str, list[int]] = field(default_factory=dict)

    def flagged_share(self, metric: str) -> float | None:
        flagged, scored = self.metrics.get(metric, (0, 0))
        return flagged / scored if scored else None


def conversations(rows: Sequence[ScoredRecord], metrics: Sequence[str]) -> list[Conversation]:
    """One Conversation per session_id among ``rows`` (records without one belong to none), those
    with the most flagged turns first, then in the order they first appear."""
    found: dict[str, Conversation] = {}
    for index, row in enumerate(rows):
        session = row.record.session_id
        if not session:
            continue
        conversation = found.setdefault(session, Conversation(session, index, metrics={m: [0, 0] for m in metrics}))
        conversation.turns += 1
        conversation.flagged_turns += any(s.ok and s.hallucinated for s in row.scores)
        for score in row.scores:
            if score.ok and score.metric in conversation.metrics:
                counts = conversation.metrics[score.metric]
                counts[0] += bool(score.hallucinated)
                counts[1] += 1
    return sorted(found.values(), key=lambda c: (-c.flagged_turns, c.first))
