"""Backfill: score what a platform already logged and put the scores back on the same traces.

``groundtrace score --from SOURCE`` reads Records from a source (groundtrace.sources), scores the
metrics each trace does not carry yet, hands the Scores to the sinks (by default the platform's
own, so they land on the traces they were read from) and appends every scored record to the
output file.

Idempotent twice over: a trace that already carries a groundtrace score of a metric is not scored
for it again (the source reads that from the platform), and a record whose id is already in the
output file is skipped, so an interrupted run resumes where it stopped. ``rescore`` does both
again from scratch. Sinks run before the output line is written: the output line is the mark that
a record is done, so a crash in between re-delivers that record's scores rather than losing them.

Privacy: ``mask`` is applied to each record as it is read, before it is scored or delivered (a
record the mask fails on is written with its id and error Scores only); ``capture_text=False``
gives the sinks no text (see groundtrace.privacy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundtrace.privacy import Mask, load_mask, take_in
from groundtrace.record import Record
from groundtrace.redaction import get_logger
from groundtrace.score import ScoredRecord
from groundtrace.sinks import emit_all, flush_sinks
from groundtrace.sources import SCORED_KEY, Source, SourceFilter
from groundtrace.sources.spans import FILTERED

log = get_logger("groundtrace.batch.backfill")


@dataclass
class BackfillSummary:
    """Every request the source looked at ends in one bucket: not a RAG request (by reason),
    already scored on the platform, already in the output file, scored, or failed."""

    read: int = 0
    filtered: int = 0
    not_rag: dict[str, int] = field(default_factory=dict)
    already_scored: int = 0
    already_in_output: int = 0
    scored: int = 0
    failed: int = 0
    sink_errors: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def settled(self) -> int:
        return self.filtered + sum(self.not_rag.values()) + self.already_scored + self.already_in_output + self.scored + self.failed

    def as_dict(self) -> dict[str, Any]:
        return {"read": self.read, "filtered": self.filtered, "not_rag": dict(self.not_rag), "already_scored": self.already_scored,
                "already_in_output": self.already_in_output, "scored": self.scored, "failed": self.failed,
                "sink_errors": self.sink_errors}

    def line(self) -> str:
        not_rag = sum(self.not_rag.values())
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.not_rag.items()))
        return (f"read {self.read} requests: {self.filtered} filtered out, {not_rag} not RAG requests{f' ({reasons})' if reasons else ''}, "
                f"{self.already_scored} already scored, {self.already_in_output} already in the output, "
                f"{self.scored} scored, {self.failed} failed"
                + (f"; {self.sink_errors} sink deliveries failed" if self.sink_errors else ""))


def done_ids(path: Path) -> set[str]:
    """Ids of the records an earlier run wrote to ``path`` (a torn last line is not done)."""
    ids: set[str] = set()
    if not path.exists():
        return ids
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, Mapping) and value.get("id") is not None:
                ids.add(str(value["id"]))
    return ids


def _open_to_resume(path: Path):
    """``path`` opened for appending, a torn last line (a run killed mid-write) cut off first."""
    if path.exists():
        with open(path, "rb+") as raw:
            data = raw.read()
            if data and not data.endswith(b"\n"):
                raw.truncate(data.rfind(b"\n") + 1)
    return open(path, "a", encoding="utf-8")


def missing_metrics(record: Record, names: Sequence[str], rescore: bool) -> list[str]:
    """The metrics of ``names`` this record's trace does not carry yet (all of them with rescore)."""
    if rescore:
        return list(names)
    scored = set(record.metadata.get(SCORED_KEY) or ())
    return [name for name in names if name not in scored]


Scorer = Callable[[Iterator[Any], Callable[[Record], Sequence[str] | None]], Iterator[ScoredRecord]]


def backfill(
    source: Source,
    metric_names: Sequence[str],
    score: Scorer,
    *,
    filters: SourceFilter | None = None,
    sinks: Sequence[Any] = (),
    output: Path | None = None,
    rescore: bool = False,
    on_result: Callable[[ScoredRecord], None] | None = None,
    mask: Mask | str | None = None,
    capture_text: bool = True,
) -> BackfillSummary:
    """Read ``source``, score with ``score(records, select)`` (an engine's iter_evaluate), deliver
    to ``sinks`` and append to ``output``. Returns the counts; never raises for one bad record.
    ``mask``/``capture_text``: see the module's doc."""
    summary = BackfillSummary()
    mask = load_mask(mask)
    skip_ids = set() if rescore or output is None else done_ids(output)
    wanted: dict[str, list[str]] = {}

    def todo() -> Iterator[Any]:
        for record in source.records(filters):
            if record.id in skip_ids:
                summary.already_in_output += 1
                continue
            needed = missing_metrics(record, metric_names, rescore)
            if not needed:
                summary.already_scored += 1
                continue
            wanted[record.id or ""] = needed
            yield take_in(record, mask)

    def select(record: Record) -> Sequence[str] | None:
        return wanted.get(record.id or "")

    handle = None if output is None else open(output, "w", encoding="utf-8") if rescore else _open_to_resume(output)
    try:
        for row in score(todo(), select):
            wanted.pop(row.id or "", None)
            summary.sink_errors += emit_all(sinks, row.record, row.scores, capture_text=capture_text)
            if handle is not None:
                handle.write(row.model_dump_json() + "\n")
                handle.flush()  # the line is the mark that this record is done: a resume trusts it
            errors = [s for s in row.scores if not s.ok]
            if errors:
                summary.failed += 1
                if len(summary.failures) < 5:
                    summary.failures.append(f"{row.id}: {errors[0].metric}: {errors[0].error}")
            else:
                summary.scored += 1
            if on_result is not None:
                on_result(row)
    finally:
        if handle is not None:
            handle.close()
        for problem in flush_sinks(sinks):
            log.warning("groundtrace: %s", problem)
    summary.read = source.stats.traces
    skipped = dict(source.stats.skipped)
    summary.filtered = skipped.pop(FILTERED, 0)
    summary.not_rag = skipped
    return summary


__all__ = ["BackfillSummary", "backfill", "done_ids", "missing_metrics"]
