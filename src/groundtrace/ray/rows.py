"""The rows that travel to the actors: each input as JSON text, with its position and key.

JSON text rather than nested columns: records differ in shape (metadata, missing fields), which
Arrow schemas do not forgive, and a corrupt input must travel as far as a good one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from groundtrace.scoring.engine import Selector
from groundtrace.record import InvalidInput, InvalidRecord, Record, coerce_record, salvage_id
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.ray")
_INVALID = "__groundtrace_invalid__"


def key_of(item: Any, position: int) -> str:
    """The record's id, else a stable positional one (the 1-based position in the input)."""
    raw = item.get("id") if isinstance(item, Mapping) else getattr(item, "id", None)
    return f"item-{position}" if raw is None or raw == "" else str(raw)


def _plain(value: Any) -> Any:
    """numpy values from Ray Datasets as plain Python; anything else as its text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def encode(item: Any) -> str:
    if isinstance(item, Record):
        return item.model_dump_json()
    if isinstance(item, InvalidInput):
        return json.dumps({_INVALID: item.model_dump()}, ensure_ascii=False)
    if isinstance(item, Mapping):
        return json.dumps(dict(item), ensure_ascii=False, default=_plain)
    return json.dumps({_INVALID: {"id": None, "message": f"a record must be a mapping or a groundtrace.Record, "
                                                           f"got {type(item).__name__}"}})


def decode(text: str) -> Any:
    value = json.loads(text)
    if isinstance(value, dict) and _INVALID in value:
        return InvalidInput(**value[_INVALID])
    return value


def selection(item: Any, select: Selector | None) -> str:
    """``select(record)`` as JSON: the metrics this record gets; "" for all (a text column either way:
    a column of nothing but None would reach the actors as NaN). Inputs that are not records get
    all (each metric writes its error Score); so does a record on which ``select`` raises, saying so."""
    if select is None:
        return ""
    try:
        chosen = select(coerce_record(item))
    except InvalidRecord:
        return ""
    except Exception as error:
        log.warning("groundtrace: select() failed on record %s (%s); scoring it with every metric",
                    salvage_id(item), error)
        return ""
    return "" if chosen is None else json.dumps(list(chosen))


def row(position: int, item: Any, select: Selector | None) -> dict[str, Any]:
    """One input as a row; ``select`` runs here, on the driver, and its answer travels with the row."""
    return {"position": position, "key": key_of(item, position), "item": encode(item),
            "select": selection(item, select)}


def rows_from_records(batch: Mapping[str, Any], select: Selector | None) -> dict[str, list[Any]]:
    """A batch of a Ray Dataset of record dicts (column -> values) as rows. Such a Dataset has no
    stable positions, so a record without an id is keyed by a digest of its content."""
    columns = list(batch)
    count = len(batch[columns[0]]) if columns else 0
    # through JSON once, so that select() sees lists and numbers rather than numpy values
    made = [row(0, decode(encode({c: batch[c][i] for c in columns})), select) for i in range(count)]
    for one in made:
        if one["key"] == "item-0":
            one["key"] = "sha-" + hashlib.blake2b(one["item"].encode(), digest_size=8).hexdigest()
    return {name: [one[name] for one in made] for name in ("position", "key", "item", "select")}
