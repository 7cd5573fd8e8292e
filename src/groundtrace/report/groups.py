"""What records can be broken down by: language, session (the conversation), day, any metadata key.

- ``language``: the record's own language, else the one its metrics detected (a record scored
  without one). ``groundtrace bench --by language`` groups by the labelled file's ``language``,
  which is what a scored record keeps, so on a file that names every record's language the groups
  and their rates are bench's.
- ``session``: ``session_id``.
- ``day``: the UTC date of the first of ``metadata["started"]`` (the request's start, which
  ``score --from`` keeps for every trace it reads), ``metadata["time"]`` or ``metadata["timestamp"]``
  that reads as a time: an ISO 8601 string, or a number of seconds (milliseconds above 1e11) since
  1970. A Record has no time field of its own; records without such a key have no day.
- ``guard``: what a guard did with the answer before the user saw it (``metadata["guard"]["action"]``: passed,
  flagged, redacted, replaced, reasked, raised, unchecked), for the records a guard handed to staging.
- ``metadata.KEY``: the value of a metadata key that holds a string, number or boolean (offered
  where its values are at most 200 characters and 1000 distinct ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any

from groundtrace.report.rates import Labels, aligned, default_threshold, direction, rates
from groundtrace.score import ScoredRecord

TIME_KEYS = ("started", "time", "timestamp")
META = "metadata."
BUILT_IN = ("language", "session", "day", "guard")
MAX_GROUPS = 1000  # distinct values of a metadata key offered as a breakdown
MAX_VALUE_CHARS = 200


def language_of(row: ScoredRecord) -> str | None:
    return row.record.language or next((s.details["language"] for s in row.scores
                                        if isinstance(s.details.get("language"), str)), None)


def day_of(row: ScoredRecord) -> str | None:
    """YYYY-MM-DD (UTC where the time says its zone), from the first time key that reads as a time."""
    for key in TIME_KEYS:
        moment = _moment(row.record.metadata.get(key))
        if moment is not None:
            return moment.isoformat()
    return None


def _moment(value: Any) -> date | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, timezone.utc).date()
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        return (moment.astimezone(timezone.utc) if moment.tzinfo else moment).date()
    return None


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def group_of(row: ScoredRecord, key: str) -> str | None:
    """The group ``row`` belongs to under ``key`` (see the module's docstring); None: none."""
    if key == "language":
        return language_of(row)
    if key == "session":
        return row.record.session_id or None
    if key == "day":
        return day_of(row)
    if key == "guard":  # what a guard did with the answer before the user saw it
        guard = row.record.metadata.get("guard")
        return _scalar(guard.get("action")) if isinstance(guard, Mapping) else None
    if key.startswith(META):
        return _scalar(row.record.metadata.get(key[len(META):]))
    raise ValueError(f"cannot break records down by {key!r}: one of {', '.join(BUILT_IN)} or metadata.KEY")


def group_keys(rows: Sequence[ScoredRecord]) -> list[str]:
    """The keys some row has a group under: the built-in ones, then the metadata keys in order of
    appearance whose values make groups: short (a prompt kept in metadata is no group) and not one
    per record of a large file (a request id)."""
    found = [key for key in BUILT_IN if any(group_of(row, key) is not None for row in rows)]
    values: dict[str, set[str]] = {}
    for row in rows:
        for name, value in row.record.metadata.items():
            text = _scalar(value)
            if text is not None:
                values.setdefault(name, set()).add(text)
    return found + [f"{META}{name}" for name, seen in values.items()
                    if len(seen) <= MAX_GROUPS and max(map(len, seen)) <= MAX_VALUE_CHARS]


def breakdown(rows: Sequence[ScoredRecord], key: str, labels: Labels = None,
              thresholds: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One entry per group under ``key``, sorted by its value, the rows with none last (value None):
    ``{"value", "records", "rows": [row index, ...], "metrics": {metric: rates}}``, each metric's
    rates at ``thresholds[metric]`` (default: its Scores' threshold) over the group's rows, as
    :func:`groundtrace.report.rates.confusion_at` gives them (cells by row index)."""
    labelled = aligned(rows, labels)
    metrics = list(dict.fromkeys(s.metric for row in rows for s in row.scores))
    cuts = {m: (thresholds or {}).get(m, default_threshold(rows, m)) for m in metrics}
    sides = {m: direction(rows, m) for m in metrics}
    members: dict[str | None, list[int]] = {}
    for index, row in enumerate(rows):
        members.setdefault(group_of(row, key), []).append(index)
    out = []
    for value in sorted(members, key=lambda v: (v is None, v or "")):
        indices = members[value]
        group_rates = {}
        for m in metrics:
            figures = rates([rows[i].score(m) for i in indices], [labelled[i] for i in indices], cuts[m], sides[m])
            figures["cells"] = {cell: [indices[p] for p in at] for cell, at in figures["cells"].items()}
            group_rates[m] = figures
        out.append({"value": value, "records": len(indices), "rows": indices, "metrics": group_rates})
    return out
