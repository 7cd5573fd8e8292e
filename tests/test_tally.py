"""The running tally behind the command line's summary: hand-computed counts, means and latency."""

from __future__ import annotations

from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord
from groundtrace.batch.tally import Tally


def row(rid: str, *scores: Score) -> ScoredRecord:
    return ScoredRecord(record=Record(id=rid, answer=f"answer {rid}", contexts=["a long context"] * 3), scores=list(scores))


def test_tally_counts_means_and_keeps_only_the_first_rows_without_contexts() -> None:
    rows = [
        row("1", Score(metric="grounding", value=0.2, higher_is_better=False, hallucinated=False, latency_ms=10.0),
            Score(metric="lexical", value=0.9, higher_is_better=True, hallucinated=False)),
        row("2", Score(metric="grounding", value=0.8, higher_is_better=False, hallucinated=True, latency_ms=30.0)),
        row("3", Score(metric="grounding", value=None, higher_is_better=False, error="boom", latency_ms=5.0)),
    ]
    tally = Tally.of(rows, keep=2)
    grounding = tally.metrics["grounding"]
    assert (tally.count, list(tally.metrics)) == (3, ["grounding", "lexical"])
    assert (grounding.records, grounding.errors, grounding.ok, grounding.flagged) == (3, 1, 2, 1)
    assert grounding.mean == 0.5  # (0.2 + 0.8) / 2 ok scores
    assert grounding.mean_latency_ms == 15.0  # (10 + 30 + 5) / 3
    assert tally.metrics["lexical"].mean_latency_ms is None
    assert [r.id for r in tally.kept] == ["1", "2"]
    assert tally.kept[0].record.contexts is None and tally.kept[0].record.answer == "answer 1"
