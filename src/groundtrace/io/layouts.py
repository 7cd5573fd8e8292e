"""Record layouts: the field names of the evaluation data users already have, in one table.

groundtrace's own names (``question``, ``contexts``, ``answer``, ``reference``), RAGAS >= 0.2
(``user_input``, ``retrieved_contexts``, ``response``, ``reference``), RAGAS before 0.2
(``question``, ``contexts``, ``answer``, ``ground_truth`` or ``ground_truths``) and DeepEval test
cases (``input``, ``actual_output``, ``retrieval_context`` or ``context``, ``expected_output``).
:data:`LAYOUTS` is the only place these names are written down; the command line's ``score``,
``bench`` and ``report``, and ``score_frame``, all map rows through it.

Detection, from the keys that carry a value in the first rows of a file (or a DataFrame's columns):
a layout *fits* when its answer key is there; of the layouts that fit, one that reads a subset of
what another reads gives way to it (a RAGAS 0.1 file with ``ground_truth`` is RAGAS 0.1, not
groundtrace's own without a reference); layouts that read the keys alike are one. What is left must
be one layout, or :class:`LayoutError` names the keys found and the layouts known. Keys no layout
names (``id``, ``language``, ``metadata``, ``label``, ``spans``, ``task``, trace ids) pass through
under their own names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from groundtrace.errors import GroundtraceError

AUTO = "auto"


class LayoutError(GroundtraceError, ValueError):
    """The rows fit no known layout, or more than one, or not the one asked for."""


def _json_text(value: Any, kind: type) -> Any:
    """A JSON list or object written as text (a CSV cell, a DataFrame read from CSV) as that value."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            decoded = json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # text, as a cell that is not JSON is: one cell, not the run
            return value
        return decoded if isinstance(decoded, kind) else value
    return value


def _list(value: Any) -> Any:
    return _json_text(value, list)


def _object(value: Any) -> Any:
    return _json_text(value, dict)


def _first(value: Any) -> Any:
    """RAGAS 0.1's ``ground_truths`` (a list) as its ``ground_truth``: the first item, as RAGAS did."""
    value = _list(value)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _label(value: Any) -> Any:
    """A 0/1 label written as text (CSV) as a number; anything else as it is, for bench to reject."""
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return int(value.strip().lower() in ("1", "true"))
    return value


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Source:
    """One key of a layout and how its value becomes the groundtrace field's."""

    key: str
    convert: Callable[[Any], Any] = _same


@dataclass(frozen=True)
class Layout:
    name: str
    #: groundtrace field -> the keys it is read from, the first with a value winning
    fields: Mapping[str, tuple[Source, ...]]

    @property
    def answer_key(self) -> str:
        return self.fields["answer"][0].key

    @property
    def keys(self) -> dict[str, str]:
        """Every key this layout reads -> the groundtrace field it becomes."""
        return {source.key: name for name, sources in self.fields.items() for source in sources}

    def fits(self, keys: Collection[str], require_answer: bool = True) -> bool:
        """Whether ``keys`` hold this layout's answer key (or, for a file of labels that needs no answer,
        any key it reads)."""
        return self.answer_key in keys if require_answer else bool(self.reading(keys))

    def reading(self, keys: Collection[str]) -> frozenset[tuple[str, str]]:
        """(key, field) of each of ``keys`` this layout reads."""
        return frozenset((key, name) for key, name in self.keys.items() if key in keys)

    def to_fields(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row under groundtrace's names: this layout's keys renamed and converted, the others as
        they are (with groundtrace's own extras, such as a label or metadata written as text, decoded)."""
        mapped = {key: PASS_THROUGH.get(key, _same)(value) for key, value in row.items() if key not in self.keys}
        for name, sources in self.fields.items():
            present = [source for source in sources if source.key in row]
            chosen = next((source for source in present if row[source.key] is not None), None)
            if chosen is not None:
                mapped[name] = chosen.convert(row[chosen.key])
            elif present:
                mapped[name] = None
        return mapped

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.keys)})"


# groundtrace's names for what no layout renames, decoded when written as text (CSV cells)
PASS_THROUGH: dict[str, Callable[[Any], Any]] = {"metadata": _object, "spans": _list, "label": _label}

LAYOUTS: tuple[Layout, ...] = (
    Layout("groundtrace", {  # groundtrace's own fields
        "question": (Source("question"),), "contexts": (Source("contexts", _list),),
        "answer": (Source("answer"),), "reference": (Source("reference"),)}),
    Layout("ragas", {  # RAGAS >= 0.2: SingleTurnSample, EvaluationDataset
        "question": (Source("user_input"),), "contexts": (Source("retrieved_contexts", _list),),
        "answer": (Source("response"),), "reference": (Source("reference"),)}),
    Layout("ragas-legacy", {  # RAGAS < 0.2; of ground_truths, the first item, as RAGAS itself read it
        "question": (Source("question"),), "contexts": (Source("contexts", _list),),
        "answer": (Source("answer"),), "reference": (Source("ground_truth"), Source("ground_truths", _first))}),
    Layout("deepeval", {  # DeepEval's LLMTestCase; retrieval_context, else context
        "question": (Source("input"),), "contexts": (Source("retrieval_context", _list), Source("context", _list)),
        "answer": (Source("actual_output"),), "reference": (Source("expected_output"),)}),
)
LAYOUT_NAMES = tuple(layout.name for layout in LAYOUTS)


def known_layouts() -> str:
    return "; ".join(layout.describe() for layout in LAYOUTS)


def layout_named(name: str) -> Layout:
    for layout in LAYOUTS:
        if layout.name == name:
            return layout
    raise LayoutError(f"unknown layout {name!r}; choose one of {', '.join((AUTO, *LAYOUT_NAMES))}")


def _listed(keys: Collection[str]) -> str:
    return ", ".join(sorted(keys)) or "none"


def detect(keys: Collection[str], where: str = "the records", require_answer: bool = True) -> Layout:
    """The one layout that reads ``keys``; :class:`LayoutError` when none or several do. Without
    ``require_answer`` (a file of labels, joined by id), keys that no layout reads are groundtrace's own."""
    fitting = [layout for layout in LAYOUTS if layout.fits(keys, require_answer)]
    if not fitting and not require_answer:
        return LAYOUTS[0]
    readings = {layout.name: layout.reading(keys) for layout in fitting}
    widest = [layout for layout in fitting if not any(readings[layout.name] < other for other in readings.values())]
    distinct: dict[frozenset[tuple[str, str]], Layout] = {}
    for layout in widest:  # of layouts that read the keys alike, the first in the table
        distinct.setdefault(readings[layout.name], layout)
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    if not distinct:
        raise LayoutError(f"{where} fit no known layout: keys found: {_listed(keys)}; each layout needs its answer key "
                          f"({', '.join(f'{layout.name}: {layout.answer_key}' for layout in LAYOUTS)}); layouts known: "
                          f"{known_layouts()}. Rename the keys, or force a layout with --schema NAME (schema= in Python)")
    both = " and ".join(f"{layout.name} (reads {_listed([key for key, _ in readings[layout.name]])})"
                        for layout in distinct.values())
    raise LayoutError(f"{where} fit more than one layout: keys found: {_listed(keys)}; they fit {both}. "
                      f"Choose one with --schema NAME (schema= in Python): {', '.join(LAYOUT_NAMES)}")


def resolve(keys: Collection[str], schema: str | None = None, where: str = "the records",
            require_answer: bool = True) -> Layout:
    """The layout named by ``schema`` (checked against ``keys``), or the one detected (``None`` or 'auto')."""
    if schema is None or schema == AUTO:
        return detect(keys, where, require_answer)
    layout = layout_named(schema)
    if require_answer and not layout.fits(keys):
        raise LayoutError(f"schema {layout.name}: {where} have no {layout.answer_key!r} (the answer); keys found: "
                          f"{_listed(keys)}; layouts known: {known_layouts()}")
    return layout


__all__ = ["AUTO", "LAYOUTS", "LAYOUT_NAMES", "Layout", "LayoutError", "Source", "detect", "known_layouts",
           "layout_named", "resolve"]
