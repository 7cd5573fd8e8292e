"""What a docs page may assert of the detector's numbers: the same on every CPU within the model card's
tolerance, so a page's invisible checks hold on an AVX2 server, an AVX-512 laptop and ARM alike.

- ``close(actual, expected)``: a value within the tolerance (plus half a unit of the expected literal's last digit).
- ``same_but_numbers(printed, expected)``: the text the same word for word; each decimal number within the
  tolerance plus the rounding of both printed forms (0.92 may print as 0.91 only where the value lies within
  the tolerance of 0.915); integers (counts, ids) exactly.
- ``covered(answer, spans)``: the characters a list of spans covers, so spans compare by what they flag, not
  by where a run of tokens happened to split.
"""

from __future__ import annotations

import re

from groundtrace.metrics.grounding import GroundingMetric

TOLERANCE = GroundingMetric.numerics()[0]
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _half_unit(literal: str) -> float:
    decimals = len(literal.partition(".")[2])
    return 0.5 * 10.0 ** -decimals if decimals else 0.0


def close(actual: float, expected: float | str, tolerance: float = TOLERANCE) -> bool:
    literal = expected if isinstance(expected, str) else repr(expected)
    return abs(actual - float(literal)) <= tolerance + _half_unit(literal) + 1e-12


def same_but_numbers(printed: str, expected: str, tolerance: float = TOLERANCE) -> bool:
    if _NUMBER.split(printed) != _NUMBER.split(expected):
        return False
    for a, b in zip(_NUMBER.findall(printed), _NUMBER.findall(expected), strict=True):
        if "." not in a and "." not in b:
            if a != b:
                return False
        elif abs(float(a) - float(b)) > tolerance + _half_unit(a) + _half_unit(b) + 1e-12:
            return False
    return True


def contains_but_numbers(printed: str, expected: str, tolerance: float = TOLERANCE) -> bool:
    """``expected`` occurs in ``printed``, numbers compared as in ``same_but_numbers``."""
    parts, numbers = _NUMBER.split(expected), _NUMBER.findall(expected)
    pattern = "".join(re.escape(part) + (f"({_NUMBER.pattern})" if i < len(numbers) else "")
                      for i, part in enumerate(parts))
    return any(same_but_numbers(match.group(0), expected, tolerance) for match in re.finditer(pattern, printed))


def covered(answer: str, spans) -> set[int]:
    """The character offsets of ``answer`` the spans (Score spans or dicts with start and end) cover, spaces
    between words excluded."""
    out: set[int] = set()
    for span in spans:
        start, end = (span["start"], span["end"]) if isinstance(span, dict) else (span.start, span.end)
        out.update(i for i in range(start, end) if not answer[i].isspace())
    return out


def covered_by_text(answer: str, phrases: list[str]) -> set[int]:
    """The characters of the first occurrence of each phrase of ``answer``, spaces excluded."""
    out: set[int] = set()
    for phrase in phrases:
        start = answer.index(phrase)
        out.update(i for i in range(start, start + len(phrase)) if not answer[i].isspace())
    return out
