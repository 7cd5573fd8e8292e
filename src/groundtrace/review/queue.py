"""What a reviewer sees next: scored records ordered by what most needs a human, filtered, with progress.

The order takes four lanes in turn: the flagged and the passed answers nearest a metric's threshold (the
verdicts a person most often overturns), and the farthest of each side (most likely what their side says), so
the labels hold both kinds from the start and reach what ``fit`` needs (30, 8 of each) soonest
(benchmarks/review_queue.py); records with no value to place (errors, metrics without a threshold) last, in the
file's order. Decided records keep their place;
the app starts at the first undecided one, so a reopened session resumes where it stopped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundtrace.combine.fitting import MIN_PER_CLASS, MIN_RECORDS
from groundtrace.io.labels import SKIP, UNSUPPORTED, Decision
from groundtrace.score import Score, ScoredRecord

BAND = 0.1  # |value - threshold| within which a verdict is "near the line"
NEAR, FLAGGED, REST = 0, 1, 2  # the queue's tiers


@dataclass(frozen=True)
class Filters:
    """What the reviewer narrowed the queue to; empty fields filter nothing."""

    metric: str = ""
    verdict: str = ""  # "flagged", "passed", "error", "near" or "undecided"
    language: str = ""
    session: str = ""
    meta_key: str = ""
    meta_value: str = ""
    guard: str = ""  # what a guard did with the answer (metadata["guard"]["action"]): "redacted", "passed", ...

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(**{name: str(query.get(name) or "") for name in cls.__dataclass_fields__})


@dataclass
class Item:
    """One scored record in the queue, with why it is where it is."""

    row: ScoredRecord
    id: str
    tier: int
    distance: float  # to the nearest threshold (near tier) or 1 - confidence (flagged tier)
    language: str = ""
    scores: dict[str, Score] = field(default_factory=dict)

    @property
    def session(self) -> str:
        return self.row.record.session_id or ""


def _scores(row: ScoredRecord) -> dict[str, Score]:
    return {score.metric: score for score in row.scores}


def _placed(score: Score) -> tuple[int, float]:
    """(tier, distance) of one metric's Score."""
    if score.ok and score.threshold is not None and score.value is not None:
        distance = abs(score.value - score.threshold)
        if distance <= BAND:
            return NEAR, distance
    if score.ok and score.hallucinated:
        return FLAGGED, 1.0 - score.hallucination_score if score.hallucination_score is not None else 1.0
    return REST, 1.0


def item_of(row: ScoredRecord, position: int, metric: str = "") -> Item:
    scores = _scores(row)
    considered = [scores[metric]] if metric in scores else ([] if metric else list(scores.values()))
    tier, distance = min((_placed(score) for score in considered), default=(REST, 1.0))
    language = str(row.record.language or next((s.details.get("language") for s in row.scores
                                                if isinstance(s.details.get("language"), str)), "") or "")
    return Item(row, row.id or row.record.id or f"#{position}", tier, distance, language, scores)


def ordered(rows: Sequence[ScoredRecord], metric: str = "") -> list[Item]:
    """Every record, in the queue's order (stable: ties keep the file's order)."""
    items = [item_of(row, i, metric) for i, row in enumerate(rows)]
    sides: tuple[list[tuple[float, int, Item]], list[tuple[float, int, Item]]] = ([], [])
    unplaced = []
    for position, item in enumerate(items):
        considered = [item.scores[metric]] if metric in item.scores else ([] if metric else list(item.scores.values()))
        placed = [(abs(s.value - s.threshold), bool(s.hallucinated)) for s in considered
                  if s.ok and s.value is not None and s.threshold is not None]
        if not placed:
            unplaced.append(item)
            continue
        distance, is_flagged = min(placed)
        sides[0 if is_flagged else 1].append((distance, position, item))
    flagged, passed = (sorted(side, key=lambda entry: (entry[0], entry[1])) for side in sides)
    # four lanes taken in turn: the nearest flagged and passed (the verdicts most often overturned), and the
    # farthest of each (most likely what their side says): both kinds of label from the first few
    lanes = [[e[2] for e in flagged], [e[2] for e in passed], [e[2] for e in reversed(flagged)],
             [e[2] for e in reversed(passed)]]
    if passed and (not flagged or passed[0][:2] < flagged[0][:2]):  # the side whose nearest is nearer starts
        lanes = [lanes[1], lanes[0], lanes[3], lanes[2]]
    taken: set[int] = set()
    order: list[Item] = []
    heads = [0, 0, 0, 0]
    while len(order) < len(flagged) + len(passed):
        for lane, items_of_lane in enumerate(lanes):
            while heads[lane] < len(items_of_lane) and id(items_of_lane[heads[lane]]) in taken:
                heads[lane] += 1
            if heads[lane] < len(items_of_lane):
                chosen = items_of_lane[heads[lane]]
                taken.add(id(chosen))
                order.append(chosen)
    return order + unplaced


def matches(item: Item, filters: Filters, decisions: Mapping[str, Decision]) -> bool:
    if filters.metric and filters.metric not in item.scores:
        return False
    if filters.verdict and not _verdict_matches(item, filters, decisions):
        return False
    if filters.language and item.language != filters.language:
        return False
    if filters.session and item.session != filters.session:
        return False
    if filters.meta_key:
        value = item.row.record.metadata.get(filters.meta_key)
        if value is None or (filters.meta_value and str(value) != filters.meta_value):
            return False
    return not filters.guard or guard_action(item.row) == filters.guard


def guard_action(row: ScoredRecord) -> str | None:
    """What a guard did with this answer before the user saw it (a record a guard handed to staging says so)."""
    guard = row.record.metadata.get("guard")
    action = guard.get("action") if isinstance(guard, Mapping) else None
    return action if isinstance(action, str) else None


def _verdict_matches(item: Item, filters: Filters, decisions: Mapping[str, Decision]) -> bool:
    if filters.verdict == "undecided":
        return item.id not in decisions
    if filters.verdict == "near":
        return item.tier == NEAR
    scores = [item.scores[filters.metric]] if filters.metric in item.scores else list(item.scores.values())
    if filters.verdict == "error":
        return any(not s.ok for s in scores)
    flagged = any(s.ok and s.hallucinated for s in scores)
    return flagged if filters.verdict == "flagged" else not flagged


def queue(rows: Sequence[ScoredRecord], filters: Filters, decisions: Mapping[str, Decision]) -> list[Item]:
    return [item for item in ordered(rows, filters.metric) if matches(item, filters, decisions)]


@dataclass(frozen=True)
class Progress:
    labelled: int  # supported or unsupported (skips are not labels)
    unsupported: int
    skipped: int
    total: int

    @property
    def supported(self) -> int:
        return self.labelled - self.unsupported

    @property
    def ready(self) -> bool:
        """Whether ``fit`` will take these labels (its own minimums)."""
        return self.labelled >= MIN_RECORDS and min(self.unsupported, self.supported) >= MIN_PER_CLASS

    def sentence(self) -> str:
        said = f"{self.labelled} labelled: {self.unsupported} unsupported"
        if self.skipped:
            said += f", {self.skipped} skipped"
        if self.ready:
            return said + "; enough for `fit`"
        return said + f"; `fit` needs {MIN_RECORDS} with {MIN_PER_CLASS} of each"

    def as_json(self) -> dict[str, Any]:
        return {"labelled": self.labelled, "unsupported": self.unsupported, "supported": self.supported,
                "skipped": self.skipped, "total": self.total, "ready": self.ready, "sentence": self.sentence()}


def progress(decisions: Mapping[str, Decision], ids: Iterable[str]) -> Progress:
    """Progress over the records of this file (decisions on other records in the labels file are not counted)."""
    known = set(ids)
    counts = Counter(d.label for key, d in decisions.items() if key in known)
    labelled = sum(n for label, n in counts.items() if label != SKIP)
    return Progress(labelled, counts[UNSUPPORTED], counts[SKIP], len(known))


__all__ = ["BAND", "Filters", "Item", "Progress", "item_of", "ordered", "progress", "queue"]
