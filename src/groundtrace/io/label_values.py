"""A human label's value, as the platforms keep it, turned into fit's and bench's 0/1 (1 = unsupported).

Defaults, each overridable:

- a boolean: true = supported, false = unsupported (for a label like ``hallucinated`` where true means
  the opposite: ``--label-map "true=unsupported,false=supported"``);
- a category, compared without case, spaces, ``-`` or ``_`` mattering: :data:`UNSUPPORTED` and
  :data:`SUPPORTED` below; any other category must be named with ``--label-map``;
- a number in [0, 1]: below 0.5 = unsupported (``--label-unsupported-below X`` moves the cut;
  ``--label-unsupported-above X`` reads numbers where higher means unsupported, e.g. a hallucination
  rate). A number outside [0, 1] (a 1-5 rating) needs one of the two, or ``--label-map "1=unsupported,..."``.

A value that maps to nothing is an error that names it, never a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

UNSUPPORTED = ("unsupported", "incorrect", "hallucinated", "hallucination", "fail", "failed", "no", "false", "bad",
               "wrong", "ungrounded", "not grounded", "unfaithful")
SUPPORTED = ("supported", "correct", "grounded", "factual", "faithful", "pass", "passed", "yes", "true", "good",
             "right")
_WORDS = {"unsupported": 1, "supported": 0}  # what a --label-map entry maps to


def normal(text: str) -> str:
    """A category as compared: lower case, ``-``/``_`` as spaces, spaces collapsed; a number as %g."""
    try:
        number = float(text)
    except ValueError:
        return re.sub(r"[\s_\-]+", " ", text.strip().lower()).strip()
    return f"{number:g}" if math.isfinite(number) else text.strip().lower()


class LabelValueError(ValueError):
    """Label values that map to neither supported nor unsupported."""


@dataclass(frozen=True)
class LabelMap:
    """How a label's value becomes 0/1 (1 = unsupported). ``categories``: the user's entries over the
    defaults (normalised text -> 0/1); numbers are cut at ``below`` (unsupported when less) or, when
    ``above`` is set, at ``above`` (unsupported when more)."""

    categories: Mapping[str, int] = field(default_factory=dict)
    below: float | None = None
    above: float | None = None

    @classmethod
    def parse(cls, mapping: str | None = None, below: float | None = None, above: float | None = None) -> LabelMap:
        """``mapping``: ``"bad=unsupported,good=supported"``."""
        if below is not None and above is not None:
            raise ValueError("give --label-unsupported-below or --label-unsupported-above, not both")
        categories = {**{word: 1 for word in UNSUPPORTED}, **{word: 0 for word in SUPPORTED}}
        for entry in (mapping or "").split(","):
            if not entry.strip():
                continue
            value, sep, meaning = entry.rpartition("=")
            meaning = meaning.strip().lower()
            if not sep or not value.strip() or meaning not in _WORDS:
                raise ValueError(f"--label-map entry {entry.strip()!r}: write VALUE=unsupported or VALUE=supported, "
                                 "comma-separated (e.g. \"bad=unsupported,good=supported\")")
            categories[normal(value)] = _WORDS[meaning]
        return cls(categories, below, above)

    def label(self, score: float | bool | None, category: str | None) -> int:
        """0/1 of a label kept as a number or boolean (``score``) and/or a category (``category``); a
        category the map knows wins over the number beside it. Raises LabelValueError."""
        if category is not None and normal(category) in self.categories:
            return self.categories[normal(category)]
        if isinstance(score, bool):
            return self.categories.get(str(score).lower(), 0 if score else 1)
        if score is not None and math.isfinite(float(score)):
            return self._number(float(score))
        if category is not None:
            try:
                return self._number(float(category))  # a number kept as text
            except ValueError:
                pass
        shown = category if category is not None else score
        raise LabelValueError(f"{shown!r} is not a value these labels map: name it with --label-map "
                              f"\"{shown}=unsupported\" (or =supported)")

    def _number(self, value: float) -> int:
        text = normal(str(value))
        if text in self.categories:  # an exact value the user mapped (a 1-5 rating, say)
            return self.categories[text]
        if self.above is not None:
            return int(value > self.above)
        if self.below is None and not 0.0 <= value <= 1.0:
            raise LabelValueError(f"{value:g} is outside [0, 1]: say where unsupported starts with "
                                  "--label-unsupported-below X or --label-unsupported-above X, or map each value "
                                  "with --label-map \"1=unsupported,5=supported\"")
        return int(value < (0.5 if self.below is None else self.below))


def unmapped_error(errors: Iterable[str], name: str) -> LabelValueError:
    """One error for every distinct value of ``name`` that maps to nothing (the first five said)."""
    distinct = list(dict.fromkeys(errors))
    more = f" (and {len(distinct) - 5} more)" if len(distinct) > 5 else ""
    return LabelValueError(f"labels named {name!r}: " + "; ".join(distinct[:5]) + more)


__all__ = ["SUPPORTED", "UNSUPPORTED", "LabelMap", "LabelValueError", "normal", "unmapped_error"]
