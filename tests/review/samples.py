"""Scored rows for the review tests: built from Scores written out by hand (the queue's order is then known),
and a few scored by the real offline metrics (the evidence)."""

from __future__ import annotations

from pathlib import Path

from groundtrace import Record
from groundtrace.score import Score, ScoredRecord, Span

XSS = '<img src=x onerror="document.body.dataset.pwned=1">'


def lexical(value: float, threshold: float = 0.4, spans: tuple[Span, ...] = ()) -> Score:
    return Score(metric="lexical", value=value, higher_is_better=True, hallucinated=value < threshold,
                 threshold=threshold, reason=f"lexical {value:.2f}", spans=list(spans))


def row(key: str, value: float, *, language: str = "en", session: str | None = None, **metadata: object) -> ScoredRecord:
    answer = f"The fee for {key} is 2 500 roubles."
    record = Record(id=key, question=f"How much is {key}?", contexts=[f"The fee for {key} is 1 879 roubles a month."],
                    answer=answer, language=language, session_id=session, metadata=dict(metadata),
                    trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7")
    flagged = (Span(start=answer.index("2 500"), end=answer.index("2 500") + 5, text="2 500", label="unexpected word"),)
    return ScoredRecord(id=key, record=record, scores=[lexical(value, spans=flagged if value < 0.4 else ())])


def many(n: int) -> list[ScoredRecord]:
    """n rows whose lexical values spread over [0, 1): every tier of the queue is present."""
    return [row(f"r{i:03d}", round((i * 37 % 100) / 100, 2), language="ru" if i % 3 == 0 else "en") for i in range(n)]


def write(rows: list[ScoredRecord], path: Path) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
    return path
