"""Times of day: "9:00", "18:30", "21:05:30", "9:00 am", "9 p.m.", "9.30 am", Chinese "9点", "9点半",
"下午3点", "9时30分". Each is one fact, keyed on the 24-hour clock ("09:00", "21:05:30"), so "9:00 am",
"09:00" and "9 am" are the same time and "9:00" is never the two numbers 9 and 00.

Clock notation needs an hour 0-23 and two-digit minutes 00-59: "3:1" and "2:1" (a ratio, a score) are not
times. A word form of another language ("в 9 часов") is left to the numbers: it is as often a duration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AMPM = r"(?P<ampm>[ap])\.?\s?m\.?(?![^\W\d_])"
_PATTERNS = [
    # 9:00, 18:30, 21:05:30, 9:00 am; not inside a longer run of digits and colons (an address, a ratio)
    rf"(?<![\d:.,])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?(?![\d:]|[.,]\d)(?:\s?{_AMPM})?",
    # 9.30 am (British): the dot reads as a clock only with am/pm after it
    rf"(?<![\d:.,])(?P<h>1[0-2]|0?\d)\.(?P<m>[0-5]\d)\s?{_AMPM}",
    # 9 am, 9 p.m.
    rf"(?<![\d:.,])(?P<h>1[0-2]|0?\d)\s?{_AMPM}",
    # 9点, 9点半, 9点30分, 9时, 下午3点
    r"(?P<part>上午|早上|凌晨|中午|下午|傍晚|晚上)?(?<![\d.])(?P<h>[01]?\d|2[0-4])\s?[点時时]"
    r"(?:\s?(?P<half>半)|\s?(?P<m>[0-5]?\d)\s?分)?",
]
_COMPILED = [re.compile(p, re.IGNORECASE) for p in _PATTERNS]
_AFTERNOON = frozenset({"下午", "傍晚", "晚上"})


@dataclass(frozen=True, slots=True)
class TimeOfDay:
    key: str  # "09:00" or "21:05:30"
    start: int
    end: int


def find_times(text: str) -> list[TimeOfDay]:
    """Every time of day in ``text``, in order, none overlapping another."""
    found: list[TimeOfDay] = []
    for pattern in _COMPILED:
        for m in pattern.finditer(text):
            if any(t.start < m.end() and m.start() < t.end for t in found):
                continue
            key = _key(m)
            if key is not None:
                found.append(TimeOfDay(key, m.start(), m.end()))
    return sorted(found, key=lambda t: t.start)


def _key(m: re.Match[str]) -> str | None:
    groups = {name: value for name, value in m.groupdict().items() if value}
    hour = int(groups["h"])
    minute = 30 if "half" in groups else int(groups.get("m", 0))
    ampm = groups.get("ampm", "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None if hour > 23 else _clock(hour, minute, groups.get("s"))  # "18:30 pm": the clock says it
        hour = hour % 12 + (12 if ampm == "p" else 0)
    elif groups.get("part") in _AFTERNOON and hour < 12:
        hour += 12
    if hour == 24:
        hour = 0
    return _clock(hour, minute, groups.get("s"))


def _clock(hour: int, minute: int, second: str | None) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second}" if second else "")
