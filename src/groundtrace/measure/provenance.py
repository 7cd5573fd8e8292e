"""What a metric was trained on, and whether a labelled file is among it: the bench's in-sample warning.

A metric declares its training files with an optional ``trained_on`` attribute (or method): a sequence of
``{"name": ..., "sha256": ...}`` where ``sha256`` is :func:`records_sha256` of that file's records (an
optional ``"note"`` says, e.g., that only part of the file was used). The shipped detector reads its list
from its card (detector/grounding.json); a Hub or user metric may declare its own. It is looked up safely:
a metric without one declares nothing, and a malformed one is logged, never raised.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

#: the fields that make a record what a model learnt from (ids, labels and metadata do not)
TEXT_FIELDS = ("question", "contexts", "answer")


def records_sha256(rows: Iterable[Any]) -> str:
    """The sha256 of a file's records by their texts, not its bytes: a copy that was re-serialised (key order,
    spacing, escapes), converted to another layout, renumbered or shuffled still matches; a copy with one
    text changed does not. Rows are records under groundtrace's names (what groundtrace.io reads); anything
    that is not a mapping (a line that did not parse) is left out."""
    digests = sorted(
        hashlib.sha256(json.dumps([row.get(key) for key in TEXT_FIELDS], ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8")).hexdigest()
        for row in rows if isinstance(row, Mapping)
    )
    return hashlib.sha256("\n".join(digests).encode("ascii")).hexdigest()


def trained_on(metric: Any) -> list[dict[str, str]]:
    """The training files ``metric`` declares (see the module doc); [] when it declares none or its
    declaration cannot be read (logged)."""
    name = getattr(metric, "name", type(metric).__name__)
    try:
        declared = getattr(metric, "trained_on", None)
        if callable(declared):
            declared = declared()
        files = []
        for entry in declared or ():
            file = {"name": str(entry["name"]), "sha256": str(entry["sha256"]).lower()}
            if entry.get("note"):
                file["note"] = str(entry["note"])
            files.append(file)
        return files
    except Exception as error:  # a user's metric must not break the bench: the warning is lost, and said so
        log.warning("%s: its trained_on could not be read (%s: %s); the bench cannot tell whether a file is in-sample",
                    name, type(error).__name__, error)
        return []


def training_file(metric: Any, digest: str) -> dict[str, str] | None:
    """The file ``metric`` was trained on whose records hash to ``digest`` (:func:`records_sha256`), or None."""
    return next((file for file in trained_on(metric) if file["sha256"] == digest), None)
