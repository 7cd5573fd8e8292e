"""Two runs of scores compared: what changed per record (joined by id) and in each metric's rates.

Each run is read at its own thresholds (those its Scores were given), so a verdict that changed is
what the two runs said, not what a slider says. Rates are over each run's whole file, as the report
of that file alone would show them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundtrace.report.rates import Labels, aligned, confusion_at, verdict
from groundtrace.score import Score, ScoredRecord

FLAGGED, CLEARED, VALUE, SAME = "newly flagged", "cleared", "value changed", "unchanged"
ERROR = "error changed"  # a metric failed (or did not run) in one run and not in the other


def _reading(score: Score | None) -> tuple[float | None, bool | None]:
    """A Score's value and its verdict at its own threshold (None, None: no Score or a failed one)."""
    if score is None or score.value is None:
        return None, None
    if score.threshold is None:
        return score.value, score.hallucinated
    return score.value, verdict(score.value, score.threshold, score.higher_is_better)


def _change(a: Score | None, b: Score | None) -> dict[str, Any]:
    (value_a, flag_a), (value_b, flag_b) = _reading(a), _reading(b)
    if (value_a is None) != (value_b is None):  # failed (or was not run) in one run only
        kind = ERROR
    elif flag_a != flag_b:
        kind = FLAGGED if flag_b else CLEARED
    elif value_a != value_b:
        kind = VALUE
    else:
        kind = SAME
    delta = value_b - value_a if value_a is not None and value_b is not None else None
    return {"a": value_a, "b": value_b, "flagged_a": flag_a, "flagged_b": flag_b, "delta": delta, "change": kind}


def _largest_delta(change: dict[str, Any]) -> float:
    return max((abs(m["delta"]) for m in change["metrics"].values() if m["delta"] is not None), default=0.0)


def _by_id(rows: Sequence[ScoredRecord]) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row.id is not None:
            found.setdefault(row.id, index)  # a repeated id: its first row stands for it
    return found


def compare(rows_a: Sequence[ScoredRecord], rows_b: Sequence[ScoredRecord], labels: Labels = None) -> dict[str, Any]:
    """Runs ``a`` and ``b`` side by side. ``labels``: by record id (a sequence is taken as run a's).

    Returns ``{"metrics": [{"name", "a": rates | None, "b": rates | None}] (None: that run has no Score of
    the metric), "shared": [the metrics of both runs], "records": [{"id", "a": index, "b": index,
    "label", "metrics": {name: {"a", "b", "flagged_a", "flagged_b", "delta", "change"}}, "change"}],
    "counts": {"both", "only_a", "only_b", "no_id", "changed", FLAGGED, CLEARED, ...}}``. Records are
    those in both runs with some change, verdict changes first, then by the largest value change."""
    metrics = list(dict.fromkeys(s.metric for rows in (rows_a, rows_b) for row in rows for s in row.scores))
    # a metric one run did not use at all changes no record: only the metrics of both are compared per record
    shared = [m for m in metrics if all(any(row.score(m) is not None for row in rows) for rows in (rows_a, rows_b))]
    # run a's labels by id, so that they join run b's rows too
    by_id = {row.id: label for row, label in zip(rows_a, aligned(rows_a, labels), strict=True)
             if row.id is not None and label is not None}
    if isinstance(labels, Mapping):
        by_id = {**{k: v for k, v in labels.items() if v in (0, 1)}, **by_id}
    index_a, index_b = _by_id(rows_a), _by_id(rows_b)
    changes: list[dict[str, Any]] = []
    counts = {"both": 0, "only_a": len(set(index_a) - set(index_b)), "only_b": len(set(index_b) - set(index_a)),
              "no_id": sum(row.id is None for rows in (rows_a, rows_b) for row in rows), "changed": 0,
              FLAGGED: 0, CLEARED: 0, ERROR: 0, VALUE: 0, SAME: 0}
    for record_id, i in index_a.items():
        j = index_b.get(record_id)
        if j is None:
            continue
        counts["both"] += 1
        per = {m: _change(rows_a[i].score(m), rows_b[j].score(m)) for m in shared}
        kinds = [c["change"] for c in per.values()]
        kind = next((k for k in (FLAGGED, CLEARED, ERROR, VALUE) if k in kinds), SAME)
        counts[kind] += 1
        if kind != SAME:
            counts["changed"] += 1
            changes.append({"id": record_id, "a": i, "b": j, "label": by_id.get(record_id), "metrics": per,
                            "change": kind})
    order = {FLAGGED: 0, CLEARED: 0, ERROR: 1, VALUE: 2}
    changes.sort(key=lambda c: (order[c["change"]], -_largest_delta(c)))
    rates = []
    for m in metrics:
        a = confusion_at(rows_a, m, labels=by_id) if any(r.score(m) is not None for r in rows_a) else None
        b = confusion_at(rows_b, m, labels=by_id) if any(r.score(m) is not None for r in rows_b) else None
        rates.append({"name": m, "a": a, "b": b})
    return {"metrics": rates, "shared": shared, "records": changes, "counts": counts}
