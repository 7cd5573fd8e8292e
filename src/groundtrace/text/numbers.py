"""Numbers, quantities and dates in a canonical form, so that "1 879" equals "1879" and
"30 дней" equals "30 days" equals "30天".

Everything here is table-driven: a language is added by extending the tables, not the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from groundtrace.text.numerals import WORD_NUMBER, ZH_NUMBER, ZH_PERCENT, word_value, zh_value
from groundtrace.text.units import COUNT, UNIT_OF, unit_after

# Spaces that separate thousands: plain, no-break, thin and narrow no-break.
_THOUSANDS_SPACE = "[ \u00a0\u2009\u202f]"
NUMBER = rf"\d{{1,3}}(?:{_THOUSANDS_SPACE}\d{{3}})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)*"
# Languages that write a decimal comma ("3,5"): there "1,879" is 1.879, elsewhere it is 1879.
_DECIMAL_COMMA = frozenset("ru uk be bg sr de fr es it pt nl pl cs sk sv da no fi tr el ro hu kk".split())

# Words that multiply the number before them ("3,5 млн", "150万", "$1.5 billion").
MULTIPLIERS: dict[str, float] = {
    "thousand": 1e3, "тыс": 1e3, "тысяча": 1e3, "тысячи": 1e3, "тысяч": 1e3, "k": 1e3, "千": 1e3,
    "million": 1e6, "millions": 1e6, "mln": 1e6, "mn": 1e6, "млн": 1e6, "миллион": 1e6, "миллиона": 1e6,
    "миллионов": 1e6, "百万": 1e6,
    "billion": 1e9, "billions": 1e9, "bn": 1e9, "млрд": 1e9, "миллиард": 1e9, "миллиарда": 1e9,
    "миллиардов": 1e9, "十亿": 1e9,
    "trillion": 1e12, "трлн": 1e12, "триллион": 1e12, "триллиона": 1e12, "триллионов": 1e12,
    "万": 1e4, "亿": 1e8,
}
_PREFIX_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "¥": "cny", "₽": "rub"}


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# A unit written in letters must end at a word boundary (so "m" does not eat "million"); CJK units
# and symbols need none, since Chinese does not separate words.
_WORD_END = r"(?:(?<=[A-Za-zА-Яа-яЁё])(?![^\W\d_])|(?<![A-Za-zА-Яа-яЁё]))"
# "5千米" is five kilometres, not five thousand metres
_MULTIPLIER = rf"(?P<mult>{_alternation(list(MULTIPLIERS))})(?!(?<=千)[米克])\.?{_WORD_END}"
_UNIT = rf"(?P<unit>{_alternation(list(UNIT_OF))}){_WORD_END}"
# a unit follows its number directly, after a space or a hyphen ("5 years", "5-year", "5年")
QUANTITY = re.compile(
    rf"(?P<cur>[$€£¥₽])?\s?(?P<num>{NUMBER})(?:\s?{_MULTIPLIER})?(?:(?:\s|\s?-\s?)?{_UNIT})?",
    re.IGNORECASE,
)
_UNIT_HERE = re.compile(rf"(?:\s|\s?-\s?)?{_UNIT}", re.IGNORECASE)
_MULTIPLIER_HERE = re.compile(rf"\s?{_MULTIPLIER}", re.IGNORECASE)
# "5-10 days", "5 to 10 years", "5至10天": the first number of a range is in the unit of the second
_RANGE = re.compile(r"\s*(?:[-–—~～]|to|or|and|до|или|и|至|到|或)\s*", re.IGNORECASE)


def parse_number(text: str, language: str = "en") -> float | None:
    """The value of a written number, or None when it is no plain number (a version like 1.2.3)."""
    s = re.sub(_THOUSANDS_SPACE, "", text.strip())
    if not s or not s[0].isdigit():
        return None
    commas, dots = s.count(","), s.count(".")
    if commas and dots:
        # whichever separator comes last is the decimal one: 1,879.50 or 1.879,50
        if s.rfind(",") > s.rfind("."):
            s = s.replace(".", "").replace(",", ".")
        else:
            s = s.replace(",", "")
    elif commas:
        parts = s.split(",")
        grouped = all(len(p) == 3 for p in parts[1:])
        if commas > 1:
            if not grouped:
                return None
            s = "".join(parts)
        elif grouped and language not in _DECIMAL_COMMA:
            s = "".join(parts)
        else:
            s = ".".join(parts)
    elif dots > 1:
        parts = s.split(".")
        if not all(len(p) == 3 for p in parts[1:]):
            return None
        s = "".join(parts)
    try:
        return float(s)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Quantity:
    value: float
    unit: str | None
    start: int
    end: int


def find_quantities(text: str, language: str = "en") -> list[Quantity]:
    """Every number in ``text`` with its multiplier and unit applied; numbers written in words
    ("five years", "пять лет", "三年") where a unit follows them."""
    found = _zh_percents(text)
    for m in QUANTITY.finditer(text):
        value = parse_number(m.group("num"), language)
        if value is None or any(q.start <= m.start("num") < q.end for q in found):
            continue
        if m.group("mult"):
            value *= MULTIPLIERS[m.group("mult").lower()]
        unit = _PREFIX_CURRENCY.get(m.group("cur") or "") or UNIT_OF.get((m.group("unit") or "").lower())
        start, end = (m.start("cur") if m.group("cur") else m.start("num")), m.end()
        if unit is None:
            unit, end = unit_after(text, end, language)
        found.append(Quantity(value, unit, start, end))
    found += _word_quantities(text, language, taken=found)
    found.sort(key=lambda q: q.start)
    return _ranges_take_their_unit(text, found)


def _word_quantities(text: str, language: str, taken: list[Quantity]) -> list[Quantity]:
    """Numbers in words, kept only with a unit of the tables after them (a counted noun is not enough)."""
    found = []
    matches = [(m.start(), m.end(), float(word_value(m))) for m in WORD_NUMBER.finditer(text)]
    for m in ZH_NUMBER.finditer(text):
        numeral, end = m.group("zh"), m.end()
        if numeral.endswith("千") and text[end:end + 1] in ("米", "克"):  # 千米, 千克: a unit
            numeral, end = numeral[:-1], end - 1
        zh = zh_value(numeral) if numeral else None
        if zh is not None:
            matches.append((m.start(), end, float(zh)))
    for start, end, value in matches:
        if any(q.start < end and start < q.end for q in taken):
            continue
        mult = _MULTIPLIER_HERE.match(text, end)
        if mult:
            value, end = value * MULTIPLIERS[mult.group("mult").lower()], mult.end()
        here = _UNIT_HERE.match(text, end)
        unit, end = (UNIT_OF[here.group("unit").lower()], here.end()) if here else unit_after(text, end, language)
        if unit is not None and unit != COUNT and not _is_idiom(text, end, unit):
            found.append(Quantity(value, unit, start, end))
    return found


def _zh_percents(text: str) -> list[Quantity]:
    found = []
    for m in ZH_PERCENT.finditer(text):
        percent = float(m.group("digits")) if m.group("digits") else zh_value(m.group("zh"), lone_one=True)
        if percent is not None:
            found.append(Quantity(float(percent), "%", m.start(), m.end()))
    return found


def _is_idiom(text: str, end: int, unit: str) -> bool:
    # 一次性 "disposable", 两次元 ...: a Chinese unit glued to the word after it
    return unit == "time" and text[end:end + 1] in ("性", "元")


def _ranges_take_their_unit(text: str, found: list[Quantity]) -> list[Quantity]:
    for i in range(len(found) - 1, 0, -1):
        first, second = found[i - 1], found[i]
        if first.unit is None and second.unit is not None:
            between = _RANGE.fullmatch(text, first.end, second.start)
            if between is not None:
                found[i - 1] = replace(first, unit=second.unit)
    return found


def canonical_number(value: float) -> str:
    """A stable text form: 1879 -> '1879', 3.50 -> '3.5', 1.5e6 -> '1500000' (a digit run too long for a
    float, which parses as infinity, -> 'inf')."""
    if abs(value) < 1e18 and value == int(value):
        return str(int(value))
    return f"{value:.10g}"


# ---------------------------------------------------------------------------------------- dates

MONTHS: dict[str, int] = {}
for _number, _forms in enumerate(
    [
        "january jan январь января январе янв",
        "february feb февраль февраля феврале фев",
        "march mar март марта марте мар",
        "april apr апрель апреля апреле апр",
        "may май мая мае",
        "june jun июнь июня июне июн",
        "july jul июль июля июле июл",
        "august aug август августа августе авг",
        "september sep sept сентябрь сентября сентябре сен сент",
        "october oct октябрь октября октябре окт",
        "november nov ноябрь ноября ноябре ноя",
        "december dec декабрь декабря декабре дек",
    ],
    start=1,
):
    for _form in _forms.split():
        MONTHS[_form] = _number

# The leading class is a cheap filter: the alternation is tried only at a word start with a letter
# that can begin a month's name (10x faster on long texts).
_MONTH_INITIALS = "".join(sorted({m[0] for m in MONTHS} | {m[0].upper() for m in MONTHS}))
_MONTH = rf"(?<![^\W\d_])(?=[{_MONTH_INITIALS}])(?P<month_name>{_alternation(list(MONTHS))})\.?{_WORD_END}"
_DAY = r"(?P<day>[0-3]?\d)(?!\d)(?:st|nd|rd|th|-?го|-?е)?"
_YEAR = r"(?P<year>[12]\d{3})"
_YEAR_SUFFIX = r"(?:\s?(?:г\.|гг\.|года|году|год)(?![^\W\d_]))?"
# Tried in order; a later pattern never takes text an earlier one matched. Separate patterns,
# because one alternation could not reuse the group names.
_DATE_PATTERNS = [
    rf"{_YEAR}-(?P<month>[01]?\d)-(?P<day>[0-3]?\d)(?!\d)",
    rf"(?P<day>[0-3]?\d)\.(?P<month>[01]?\d)\.{_YEAR}(?!\d)",
    rf"(?P<a>[01]?\d)/(?P<b>[0-3]?\d)/{_YEAR}(?!\d)",
    rf"{_YEAR}\s?年\s?(?P<month>[01]?\d)\s?月(?:\s?(?P<day>[0-3]?\d)\s?[日号])?",
    r"(?P<month>[01]?\d)\s?月\s?(?P<day>[0-3]?\d)\s?[日号]",
    r"(?<![月\d])(?P<day>[0-3]?\d)\s?[日号](?![内以后前])",  # "21日": the 21st (of a month said earlier)
    rf"{_MONTH}\s+{_DAY},?(?:\s+{_YEAR})?{_YEAR_SUFFIX}",
    rf"{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?{_YEAR_SUFFIX}",
    rf"{_MONTH},?\s+{_YEAR}{_YEAR_SUFFIX}",
    rf"{_YEAR}\s?(?:年|г\.|года|году|год)(?![^\W\d_])",
]
@dataclass(frozen=True, slots=True)
class Date:
    """A calendar date, possibly partial: '2024-03-05', '2024-03', '--03-05' or '2024'."""

    key: str
    year: int | None
    start: int
    end: int


def find_dates(text: str, language: str = "en") -> list[Date]:
    found: list[Date] = []
    for pattern in _COMPILED_DATES:
        for m in pattern.finditer(text):
            if any(d.start < m.end() and m.start() < d.end for d in found):
                continue
            date = _date_from_match(m, language)
            if date is not None:
                found.append(date)
    return sorted(found, key=lambda d: d.start)


def _date_from_match(m: re.Match[str], language: str) -> Date | None:
    found = {name: text for name, text in m.groupdict().items() if text}  # the named groups that matched
    year = int(found["year"]) if "year" in found else None
    month: int | None = None
    day: int | None = None
    if "a" in found:  # n/n/yyyy: month first in English unless that cannot be
        a, b = int(found["a"]), int(found["b"])
        month, day = (a, b) if language == "en" and a <= 12 else (b, a)
    else:
        if "month_name" in found:
            month = MONTHS[found["month_name"].lower()]
        elif "month" in found:
            month = int(found["month"])
        day = int(found["day"]) if "day" in found else None
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        return None
    if month is None and year is None:
        key = f"---{day:02d}"
    elif month is None:
        key = f"{year}"
    elif day is None:
        key = f"{year}-{month:02d}" if year else f"--{month:02d}"
    else:
        key = f"{year}-{month:02d}-{day:02d}" if year else f"--{month:02d}-{day:02d}"
    return Date(key, year, m.start(), m.end())


_COMPILED_DATES = [re.compile(p, re.IGNORECASE) for p in _DATE_PATTERNS]
