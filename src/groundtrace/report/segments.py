"""Overlapping marks -> non-overlapping segments, so that several metrics can highlight one text.

HTML elements cannot overlap, so a text marked by several metrics is cut at every mark boundary and
each piece carries the set of marks that cover it. One sweep over the sorted boundaries: the cost
grows with the number of marks, never with the product of marks and text length.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import pairwise


@dataclass(frozen=True)
class Mark:
    """[start, end) characters of a text that one source (a metric, or "gold") points at."""

    start: int
    end: int
    source: str
    label: str
    score: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Segment:
    text: str
    marks: tuple[Mark, ...] = ()

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(m.source for m in self.marks))


def segment(text: str, marks: Iterable[Mark]) -> list[Segment]:
    """``text`` cut into consecutive segments, each with the marks that cover all of it."""
    size = len(text)
    kept = []
    for mark in marks:
        start, end = max(0, min(mark.start, size)), max(0, min(mark.end, size))
        if start < end:  # offsets past the end (a metric's bug, an edited answer) are clipped, not fatal
            kept.append(replace(mark, start=start, end=end) if (start, end) != (mark.start, mark.end) else mark)
    if not kept:
        return [Segment(text)] if text else []
    opening: dict[int, list[int]] = defaultdict(list)
    closing: dict[int, list[int]] = defaultdict(list)
    for i, mark in enumerate(kept):
        opening[mark.start].append(i)
        closing[mark.end].append(i)
    boundaries = sorted({0, size, *opening, *closing})
    active: set[int] = set()
    pieces: list[list] = []  # [start, end, mark indices]; adjacent pieces with the same marks are joined
    for start, end in pairwise(boundaries):
        active.difference_update(closing.get(start, ()))
        active.update(opening.get(start, ()))
        covering = tuple(sorted(active))  # input order, whatever the boundary order
        if pieces and pieces[-1][2] == covering:
            pieces[-1][1] = end
        else:
            pieces.append([start, end, covering])
    return [Segment(text[start:end], tuple(kept[i] for i in covering)) for start, end, covering in pieces]
