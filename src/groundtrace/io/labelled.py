"""Where `fit` and `bench` get labelled records: a file with a ``label`` field (:func:`load_labelled`), or

- a file of records joined by record id with a review labels file (``--labels FILE``, what
  `groundtrace review` writes): the last decision of an id counts, skips and records without a
  decision are left out and counted;
- the records of a platform (``--from``), labelled by the human labels the platform keeps under one
  name (``--label-name``), mapped to 0/1 by a :class:`~groundtrace.io.label_values.LabelMap`; or
  joined with a labels file, as a file's records are.

Each returns the labelled records in the order they were read, and a :class:`LabelCount` that says
what was left out, for the line `fit` and `bench` print.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundtrace.io import read_layout
from groundtrace.io.label_values import LabelMap, LabelValueError, unmapped_error
from groundtrace.record import InvalidInput
from groundtrace.score import Score, scores_by_id


@dataclass
class Labelled:
    raw: Mapping[str, Any]
    label: int
    groups: dict[str, str]


# the keys every bench breaks its figures down by; ``by`` adds others (a conversation, a customer)
GROUP_KEYS = ("task", "language")
# short names for Record fields a user may break figures down by
_BY_ALIASES = {"session": "session_id", "conversation": "session_id"}


def group_keys(by: Sequence[str] = ()) -> tuple[str, ...]:
    """The row keys a bench groups by: task and language, then ``by`` ('session' names session_id)."""
    return tuple(dict.fromkeys([*GROUP_KEYS, *(_BY_ALIASES.get(key, key) for key in by)]))


def load_labelled(path: str | Path, limit: int | None = None, schema: str | None = None,
                  by: Sequence[str] = ()) -> list[Labelled]:
    """The labelled rows of ``path`` (JSON Lines, CSV or Parquet, in any layout of groundtrace.io.layouts;
    ``schema`` forces one), each under groundtrace's names with its 0/1 ``label`` and its groups
    (see :func:`group_keys`)."""
    keys = group_keys(by)
    items: list[Labelled] = []
    for row in read_layout(path, schema).rows:
        if isinstance(row, InvalidInput):
            raise ValueError(f"{path}: {row.message}")
        label = row.get("label")
        if label not in (0, 1, True, False):
            raise ValueError(f"{path}: record {row.get('id')!r} has no 0/1 'label' (got {label!r}); "
                             "or give the labels apart: --labels FILE (a `groundtrace review` labels file)")
        items.append(labelled(row, int(label), keys))
        if limit and len(items) >= limit:
            break
    return items


def labelled(row: Mapping[str, Any], label: int, keys: Sequence[str] = GROUP_KEYS) -> Labelled:
    """A record under groundtrace's names with its 0/1 label, grouped by ``keys`` (see :func:`group_keys`)."""
    return Labelled(row, label, {key: str(row[key]) for key in keys if row.get(key) not in (None, "")})


@dataclass(frozen=True)
class LabelCount:
    """What a join kept and left out: ``records`` read, ``labelled`` kept (``unsupported`` of them),
    ``skipped`` (a reviewer's skip), ``undecided`` (no label), ``strays`` (labels of ids not read)."""

    origin: str
    records: int
    labelled: int
    unsupported: int
    skipped: int = 0
    undecided: int = 0
    strays: int = 0

    def line(self) -> str:
        text = (f"labels from {self.origin}: {self.labelled} of {self.records} records labelled "
                f"({self.unsupported} unsupported)")
        left = [f"{n} {what}" for n, what in ((self.skipped, "skipped"), (self.undecided, "without a label"))
                if n]
        if left:
            text += f"; {' and '.join(left)} left out"
        if self.strays:
            text += f"; {self.strays} labels name records not read here"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "records": self.records, "labelled": self.labelled,
                "unsupported": self.unsupported, "skipped": self.skipped, "undecided": self.undecided,
                "strays": self.strays}


def read_review_labels(path: str | Path) -> tuple[dict[str, int], set[str]]:
    """A review labels file: record id -> 0/1, and the ids whose last decision is a skip. A file that
    is not there is an error here (the review app starts one; fit cannot)."""
    from groundtrace.io.labels import read_decisions

    if not Path(path).is_file():
        raise FileNotFoundError(f"labels file {path} does not exist (`groundtrace review` writes one as you label)")
    decisions = read_decisions(path)
    labels = {key: label for key, d in decisions.items() if (label := d.hallucinated) is not None}
    return labels, {key for key, d in decisions.items() if d.hallucinated is None}


def join(rows: Iterable[Mapping[str, Any]], labels: Mapping[str, int], skipped: Iterable[str], origin: str,
         by: Sequence[str] = (), limit: int | None = None) -> tuple[list[Labelled], LabelCount]:
    """``rows`` (records under groundtrace's names) that ``labels`` holds by id, in their order, each with
    its label (also as its ``label`` field: the row a labelled file would hold); at most ``limit``."""
    keys, skips = group_keys(by), set(skipped)
    items: list[Labelled] = []
    records = skip = undecided = 0
    seen: set[str] = set()
    for row in rows:
        records += 1
        key = "" if row.get("id") in (None, "") else str(row["id"])
        seen.add(key)
        if key in labels:
            if not limit or len(items) < limit:
                items.append(labelled({**row, "label": labels[key]}, labels[key], keys))
        elif key in skips:
            skip += 1
        else:
            undecided += 1
    if records and seen <= {""}:
        raise ValueError(f"the records of {origin} have no id: labels are joined by record id")
    strays = len(set(labels) - seen)
    return items, LabelCount(origin, records, len(items), sum(i.label for i in items), skip, undecided, strays)


def labelled_from_file(path: str | Path, labels_path: str | Path, *, limit: int | None = None,
                       schema: str | None = None, by: Sequence[str] = ()) -> tuple[list[Labelled], LabelCount]:
    """The records of ``path`` joined by id with the review labels file ``labels_path``."""
    labels, skipped = read_review_labels(labels_path)
    rows = []
    for row in read_layout(path, schema).rows:
        if isinstance(row, InvalidInput):
            raise ValueError(f"{path}: {row.message}")
        rows.append(row)
    return join(rows, labels, skipped, Path(labels_path).name, by, limit)


def labelled_from_source(spec: str, *, label_name: str | None = None, label_map: LabelMap | None = None,
                         labels_path: str | Path | None = None, limit: int | None = None, by: Sequence[str] = (),
                         source_options: Mapping[str, Any] | None = None,
                         settings: Any = None) -> tuple[list[Labelled], LabelCount]:
    """The records a source reads (at most ``limit``), labelled by the human labels named ``label_name``
    that its platform keeps, or by a review labels file (``labels_path``)."""
    from groundtrace.sources import SourceFilter, open_source
    from groundtrace.sources.human_labels import latest, names_on, read_human_labels

    if (label_name is None) == (labels_path is None):
        raise ValueError(f"with --from {spec}: name the platform's label (--label-name NAME) or give a labels file "
                         "(--labels FILE), one of the two")
    source = open_source(spec, settings, **dict(source_options or {}))
    try:
        records = list(source.records(SourceFilter(limit=limit)))
        rows = [record.model_dump(exclude_none=True) for record in records]
        if labels_path is not None:
            reviewed, skipped = read_review_labels(labels_path)
            return join(rows, reviewed, skipped, Path(labels_path).name, by)
        assert label_name is not None
        found = read_human_labels(source, records)
    finally:
        source.close()
    chosen = latest(found, label_name)
    if records and not chosen:
        names = names_on(found)
        there = (", ".join(f"{name} (on {n})" for name, n in names.most_common()) if names
                 else "none: nobody has labelled these records there yet")
        raise ValueError(f"no human label named {label_name!r} on the {len(records)} records read from {source.spec}; "
                         f"the human labels there are named: {there}")
    mapping = label_map or LabelMap.parse()
    labels: dict[str, int] = {}
    errors: list[str] = []
    for key, label in chosen.items():
        try:
            labels[key] = mapping.label(label.score, label.category)
        except LabelValueError as error:
            errors.append(str(error))
    if errors:
        raise unmapped_error(errors, label_name)
    return join(rows, labels, (), f"{source.spec} ({label_name!r})", by)


__all__ = ["LabelCount", "join", "labelled_from_file", "labelled_from_source", "read_review_labels"]


def stored_scores(path: str | Path, options: Container[str] = (), rescore: bool = False) -> dict[str, dict[str, Score]] | None:
    """A scores file's own Scores, record id -> metric -> Score, that a bench or fit on the file reuses instead of
    scoring again: None where ``path`` holds records, not scores, or ``rescore`` says to score everything again;
    never a metric named in ``options`` (its stored scores are of another setting)."""
    from groundtrace.io import is_scores_file, read_scored

    if rescore or not is_scores_file(path):
        return None
    return {rid: {name: s for name, s in by_metric.items() if name not in options}
            for rid, by_metric in scores_by_id(read_scored(path)).items()}
