"""The inputs of a fit from a labelled file: each metric's values on each record (scored now, or read
from a ``groundtrace score -o`` file of the same records), the records' languages and CV groups."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundtrace.measure.bench import Labelled, record_id, scores_for
from groundtrace.metrics import get_metric
from groundtrace.score import Score
from groundtrace.text.lang import guess_language


@dataclass
class FitInputs:
    values: np.ndarray  # n x k hallucination-oriented values, NaN where a metric failed
    labels: np.ndarray
    languages: list[str]
    groups: list[str]
    scores: dict[str, list[Score]]  # by metric, in record order


def metric_scores(items: Sequence[Labelled], names: Sequence[str], options: Mapping[str, Mapping[str, Any]],
                  scored: Mapping[str, Mapping[str, Score]] | None = None,
                  progress: Callable[[str, int], Callable[[], None]] | None = None) -> dict[str, list[Score]]:
    """Each metric's Score of each item: from ``scored`` where it holds the record's id and the metric,
    else scored here (once per metric, in record order)."""
    out: dict[str, list[Score]] = {}
    for name in names:
        missing = sum(1 for item in items if name not in (scored or {}).get(record_id(item), {}))
        if not missing:  # all read: the metric (and its model) is not even built
            out[name] = [scored[record_id(item)][name] for item in items] if scored else []
            continue
        metric = get_metric(name, **dict(options.get(name, {})))
        out[name] = scores_for(metric, items, scored, progress(name, missing) if progress else None).scores
    return out


def fit_inputs(items: Sequence[Labelled], scores: Mapping[str, Sequence[Score]], group: str | None = None) -> FitInputs:
    names = list(scores)
    values = np.array([[np.nan if (h := scores[name][i].hallucination_score) is None else h for name in names]
                       for i in range(len(items))], dtype=float).reshape(len(items), len(names))
    languages = [_language(item, [scores[name][i] for name in names]) for i, item in enumerate(items)]
    return FitInputs(values, np.array([item.label for item in items]), languages, groups_of(items, group),
                     {name: list(s) for name, s in scores.items()})


def groups_of(items: Sequence[Labelled], key: str | None = None) -> list[str]:
    """The cross-validation group of each record: ``key`` (a field, or a dotted path such as
    meta.source_id), else meta.source_id or session_id where every record has one, else the record."""
    if key is not None:
        found = [_lookup(item.raw, key) for item in items]
        if any(value is None for value in found):
            raise ValueError(f"--group {key}: not every record has it")
        return [str(value) for value in found]
    for candidate in ("meta.source_id", "session_id"):
        found = [_lookup(item.raw, candidate) for item in items]
        if all(value is not None for value in found):
            return [str(value) for value in found]
    return [record_id(item) or str(i) for i, item in enumerate(items)]


def _lookup(row: Mapping[str, Any], dotted: str) -> Any:
    value: Any = row
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _language(item: Labelled, scores: Sequence[Score]) -> str:
    """The record's language, as the metrics read it (their details), else its field, else a guess."""
    for score in scores:
        if score.details.get("language"):
            return str(score.details["language"])
    raw = item.raw
    return str(raw.get("language") or guess_language(str(raw.get("answer") or "")))
