"""Find a (nearly) verbatim excerpt in a text, so a Score can point at answer characters.

Judges and rewriting models copy almost verbatim: case, runs of whitespace, typographic quotes and
dashes may differ, and so may ``‹`` (U+2039), which the judge prompts' data fences put in place of
a ``<`` that starts a data-like tag (:mod:`groundtrace.metrics.judged.fence`). Matching is exact
first, then on a normalised form whose characters map back to the text's offsets.
"""

from __future__ import annotations

import re

_FOLD = str.maketrans({"“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "‘": "'", "’": "'", "–": "-", "—": "-",
                       "\u2039": "<", "\u00a0": " "})
_EDGES = " \t\r\n.,;:!?。，；：！？…"
MIN_EXCERPT = 3  # characters: shorter excerpts match anywhere and point at nothing in particular


def _normalised(text: str) -> tuple[str, list[int]]:
    """Case-folded text with whitespace runs collapsed, and the original index of each character."""
    chars: list[str] = []
    index: list[int] = []
    for i, c in enumerate(text.translate(_FOLD)):
        if c.isspace():
            if chars and chars[-1] == " ":
                continue
            c = " "
        for folded in c.casefold():
            chars.append(folded)
            index.append(i)
    return "".join(chars), index


def locate(text: str, excerpt: str | None) -> tuple[int, int] | None:
    """[start, end) of ``excerpt`` in ``text``, or None when it is not there."""
    excerpt = (excerpt or "").strip().strip(_EDGES)
    if len(excerpt) < MIN_EXCERPT:
        return None
    found = text.find(excerpt)
    if found >= 0:
        return found, found + len(excerpt)
    haystack, index = _normalised(text)
    needle, _ = _normalised(excerpt)
    needle = needle.strip()
    found = haystack.find(needle) if needle else -1
    if found < 0:
        return None
    return index[found], index[found + len(needle) - 1] + 1


def first_located(text: str, *excerpts: str | None) -> tuple[int, int] | None:
    for excerpt in excerpts:
        where = locate(text, excerpt)
        if where is not None:
            return where
    return None


def normalised_text(text: str) -> str:
    """The matching form of ``text`` (for containment tests between texts)."""
    return re.sub(r"\s+", " ", _normalised(text)[0]).strip()
