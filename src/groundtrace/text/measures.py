"""What a stated quantity means, for comparing two of them: its unit's dimension and conversions, the
bound or approximation words around it, ranges, and the precision it was written to.

"two weeks" is 14 days, "1.5 km" is 1500 m, "at least 5 floors" is the interval [5, inf), "about 50"
is 50 give or take, "5-10 days" is [5, 10]. Table-driven, in English, Russian and Chinese.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from groundtrace.text.units import COUNT_UNITS

# unit -> (dimension, size in the dimension's base, largest size): month and year have no fixed
# length in days, a gigabyte is 1000 or 1024 megabytes, so a size can be an interval.
_SIZES: dict[str, tuple[str, float, float]] = {
    "second": ("time", 1, 1), "minute": ("time", 60, 60), "hour": ("time", 3600, 3600),
    "day": ("time", 86400, 86400), "week": ("time", 604800, 604800),
    "month": ("time", 28 * 86400, 31 * 86400), "year": ("time", 365 * 86400, 366 * 86400),
    "decade": ("time", 3652 * 86400, 3653 * 86400),
    "m": ("length", 1, 1), "km": ("length", 1000, 1000), "cm": ("length", 0.01, 0.01),
    "mile": ("length", 1609.344, 1609.344), "inch": ("length", 0.0254, 0.0254), "foot": ("length", 0.3048, 0.3048),
    "g": ("mass", 1, 1), "kg": ("mass", 1000, 1000), "t": ("mass", 1e6, 1e6),
    "mb": ("data", 1, 1), "gb": ("data", 1000, 1024),
}
# calendar units convert among themselves exactly: a year is 12 months whatever its days
_MONTHS = {"month": 1, "year": 12, "decade": 120}


def dimension(unit: str | None) -> str | None:
    """What a unit measures; currencies, per cent, speed and degrees are each their own; counts are 'count'."""
    if unit is None:
        return None
    if unit in COUNT_UNITS:
        return "count"
    size = _SIZES.get(unit)
    return size[0] if size else unit


def convert(value: float, unit: str | None, to: str | None) -> tuple[float, float] | None:
    """``value`` in ``unit`` expressed in ``to``: an interval (month -> days is 28..31 times), or None
    when the two do not measure the same thing."""
    if unit == to:
        return value, value
    if unit in _MONTHS and to in _MONTHS:
        exact = value * _MONTHS[unit] / _MONTHS[to]
        return exact, exact
    a, b = _SIZES.get(unit or ""), _SIZES.get(to or "")
    if a is None or b is None or a[0] != b[0]:
        return None
    low, high = value * a[1] / b[2], value * a[2] / b[1]
    return min(low, high), max(low, high)


# ------------------------------------------------------------------------------ bounds and approximations

# Words before a number and after it that bound or soften it: "at least 5", "5 or more", "около 50", "50左右".
_BEFORE = {
    "ge": "at least|no less than|not less than|no fewer than|a minimum of|minimum of|minimum|from|starting at|"
          "не менее|не меньше|как минимум|минимум|от|начиная с|至少|不少于|不低于|不小于|最少|最低",
    "gt": "more than|over|above|exceeding|greater than|upwards of|older than|более|больше|свыше|старше|超过|多于|高于|大于|逾",
    "le": "up to|at most|no more than|not more than|a maximum of|maximum of|maximum|within|as many as|"
          "до|не более|не больше|не свыше|максимум|в пределах|不超过|最多|至多|不多于|不高于|不大于|最高|最长",
    "lt": "less than|under|below|fewer than|younger than|менее|меньше|ниже|младше|моложе|少于|低于|小于|不到|不足|未满",
    "approx": "about|around|approximately|approx\\.?|roughly|nearly|almost|some|an estimated|estimated|close to|"
              "~|около|примерно|приблизительно|почти|порядка|где-то|约|大约|大概|近|将近|接近|差不多|约合",
}
_AFTER = {
    "ge": "or more|or above|or older|or longer|or over|and up|and above|and older|plus|\\+|или более|и более|"
          "и больше|или больше|и старше|и выше|以上|及以上|或以上|起",
    "le": "or less|or fewer|or under|or younger|or shorter|and under|and below|и менее|или менее|и меньше|"
          "или меньше|и младше|以下|以内|及以下|之内|内",
    "gt": "余|多",
    "approx": "or so|-ish|左右|上下|许",
}
_BEFORE_RE = {k: re.compile(rf"(?:^|(?<=[\s(«\"“]))(?:{v})\s*$", re.IGNORECASE) for k, v in _BEFORE.items()}
_AFTER_RE = {k: re.compile(rf"^\s*(?:{v})(?![^\W\d_])", re.IGNORECASE) for k, v in _AFTER.items()}
_CJK_BEFORE = {k: re.compile(rf"(?:{v})[有为是达]?$") for k, v in _BEFORE.items()}  # 至少有5层


def qualifier(text: str, start: int, end: int) -> str | None:
    """'ge', 'gt', 'le', 'lt' or 'approx' when words around ``text[start:end]`` bound or soften it."""
    before, after = text[max(0, start - 24) : start], text[end : end + 16]
    for kind, pattern in _AFTER_RE.items():
        # a Chinese suffix binds without a space; a Latin or Cyrillic one follows a space or a hyphen
        if pattern.search(after):
            return kind
    for kind, pattern in _BEFORE_RE.items():
        if pattern.search(before) or _CJK_BEFORE[kind].search(before.rstrip()):
            return kind
    return None


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float
    approx: bool = False

    def holds(self, value: float, tolerance: float = 1e-9) -> bool:
        return self.low - tolerance * max(1.0, abs(self.low)) <= value <= self.high + tolerance * max(1.0, abs(self.high))

    def meets(self, other: Interval) -> bool:
        return self.low <= other.high + 1e-9 and other.low <= self.high + 1e-9

    @property
    def bounded(self) -> bool:
        return self.low != self.high


def interval(value: float, kind: str | None) -> Interval:
    """The values a number stated with ``kind`` (from :func:`qualifier`) allows; 'gt' and 'lt' are read as
    their closed forms: "over 30 days" allows 30.5, and a claim of 31 is not a contradiction."""
    if kind in ("ge", "gt"):
        return Interval(value, math.inf)
    if kind in ("le", "lt"):
        return Interval(-math.inf if value < 0 else 0.0, value)
    return Interval(value, value, approx=kind == "approx")


# "between 2 and 4", "2-4", "от 2 до 4", "2至4": two numbers of one range
_RANGE_BETWEEN = re.compile(r"^\s*(?:[-–—~～]|to|and|through|до|по|至|到|-|—)\s*$", re.IGNORECASE)
_RANGE_OPEN = re.compile(r"(?:between|from|от|с|从|在)\s*$", re.IGNORECASE)


def is_range(text: str, first_end: int, second_start: int, first_start: int) -> bool:
    """Do two numbers of ``text`` form one range? 'and' only after 'between' ("between 2 and 4")."""
    between = text[first_end:second_start]
    if not _RANGE_BETWEEN.match(between) or second_start - first_end > 12:
        return False
    if between.strip().lower() in ("and", "до", "по"):
        return _RANGE_OPEN.search(text[max(0, first_start - 10) : first_start]) is not None
    return True


# ------------------------------------------------------------------------------ precision

_DIGITS = re.compile(r"\d[\d \u00a0\u2009\u202f,.]*\d|\d")


def precision(text: str, value: float, *, zeros: bool = True) -> float:
    """The step a written number was rounded to: '50' -> 10, '1.5 million' -> 100000, '49.7' -> 0.1,
    '3,5' (ru) -> 0.1, 'two weeks' -> 1; with ``zeros`` false, trailing zeros do not count ('50' -> 1)."""
    m = _DIGITS.search(text)
    if m is None or value == 0:
        return 1.0
    digits = re.sub(r"[ \u00a0\u2009\u202f]", "", m.group())
    whole = re.sub(r"[.,]", "", digits)
    cut = max(digits.rfind("."), digits.rfind(","))
    decimals = len(digits) - cut - 1 if cut >= 0 else 0
    zeros_step = 10.0 ** (len(whole) - len(whole.rstrip("0"))) if zeros and whole.strip("0") else 1.0
    # read as an integer or with a decimal mark: whichever the parsed value (and a multiplier) agrees with
    for written, step in ((int(whole), zeros_step), (int(whole) / 10.0**decimals, 10.0**-decimals)):
        scale = value / written if written else 0.0
        if any(abs(scale - k) <= 1e-9 * k for k in _SCALES):
            return step * scale
    return 1.0


_SCALES = (1.0, 1e3, 1e4, 1e6, 1e8, 1e9, 1e12)


def rounds_to(value: float, claimed: float, step: float) -> bool:
    """Is ``claimed`` ``value`` rounded to ``step``?"""
    return step > 0 and abs(value - claimed) <= step / 2 + 1e-9 * max(1.0, abs(claimed))


# ------------------------------------------------------------------------------ halves and dozens

@dataclass(frozen=True, slots=True)
class Extra:
    value: float
    unit: str
    start: int
    end: int


# Quantities the number tables do not read: "half an hour", "полчаса", "полтора года", "半小时", "一个半月";
# the unit is the pattern's group, or fixed where the pattern has none.
_EXTRA: list[tuple[re.Pattern[str], float, str | None]] = [
    (re.compile(r"\b(?:a\s+)?half\s+(?:an?\s+)?(hour|day|year|month|week)s?\b", re.IGNORECASE), 0.5, None),
    (re.compile(r"\b(?:an?|one)\s+(hour|day|year|month|week)\s+and\s+a\s+half\b", re.IGNORECASE), 1.5, None),
    (re.compile(r"(?<![^\W\d_])пол(часа|года|дня|месяца)(?![^\W\d_])", re.IGNORECASE), 0.5, None),
    (re.compile(r"(?<![^\W\d_])полтор[аы]\s+(часа|года|суток|месяца|недели)(?![^\W\d_])", re.IGNORECASE), 1.5, None),
    (re.compile(r"(?<![一二两三四五六七八九十个])半个?(小时|天|年|月|星期)"), 0.5, None),
    (re.compile(r"一个半(小时|月|星期)"), 1.5, None),
    (re.compile(r"一年半"), 1.5, "year"),
    (re.compile(r"\b(?:a|one)\s+dozen\b", re.IGNORECASE), 12.0, "count"),
]
_EXTRA_UNITS = {"hour": "hour", "day": "day", "year": "year", "month": "month", "week": "week",
                "часа": "hour", "года": "year", "дня": "day", "суток": "day", "месяца": "month",
                "недели": "week", "小时": "hour", "天": "day", "年": "year", "月": "month", "星期": "week"}


def extra_quantities(text: str) -> list[Extra]:
    """Halves, one and a half, a dozen: quantities with a value but no digits or number word."""
    found: list[Extra] = []
    for pattern, value, fixed in _EXTRA:
        for m in pattern.finditer(text):
            if any(e.start < m.end() and m.start() < e.end for e in found):
                continue
            unit = fixed or _EXTRA_UNITS[m.group(1).lower()]
            found.append(Extra(value, unit, m.start(), m.end()))
    return sorted(found, key=lambda e: e.start)
