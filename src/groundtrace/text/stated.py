"""The facts of one sentence as text/conflicts.py compares them: each with its value as an interval (a
bound, a range, an approximation), the content words near it and what it counts.

Beyond text.facts: halves and dozens (text.measures), "1987年开放" as the year 1987, Russian clock words
("8 утра" is 08:00, "8 вечера" 20:00), numbers in words that count a noun in the evidence ("шесть рейсов"),
the scale of a temperature, and numbers that point into the prompt ("passages 1, 2 and 3") left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from groundtrace.text import anchors
from groundtrace.text.facts import Fact, extract_facts
from groundtrace.text.measures import Interval, extra_quantities, interval, is_range
from groundtrace.text.measures import qualifier as bound_of
from groundtrace.text.numerals import WORD_NUMBER, ZH_NUMBER, word_value, zh_value
from groundtrace.text.units import COUNT, ZH_CLASSIFIERS, unit_after


@dataclass(frozen=True, slots=True)
class Stated:
    """A fact as compared: its value as an interval in its own unit, and what it is about."""

    fact: Fact
    span: Interval | None  # numbers only
    bounded: str | None  # 'ge', 'gt', 'le', 'lt', 'range', 'approx' as written, or None
    near: frozenset[str]  # content stems near it
    counts: frozenset[str]  # the noun a count counts
    scale: str | None = None  # 'C' or 'F' for a temperature whose scale is written
    close: frozenset[str] = frozenset()  # content stems right next to it: which of two candidates is meant


# "passages 1, 2, and 3", "Question 1:", "(Passage 2)": numbers of the prompt, not of the world
_REFERENCE = re.compile(r"(?:passages?|questions?|documents?|sources?|contexts?|answers?|пассаж\w*|фрагмент\w*|"
                        r"документ\w*|вопрос\w*|文档|段落|问题)\s*(?:#|№)?\s*(?:\d+\s*(?:,?\s*(?:and|or|&|и|или)|,|、|和)?\s*)*$",
                        re.IGNORECASE)
_RU_CLOCK = re.compile(r"\s+(утра|вечера)(?![^\W\d_])", re.IGNORECASE)
_LEADING_NUMBER = re.compile(r"[\d.,\s]*")
_SCALE = re.compile(r"^\s?(?:°\s?|degrees?\s+|градус\w*\s+(?:по\s+)?)?(?P<s>[CF]\b|℃|℉|celsius|fahrenheit|цельси\w*|"
                    r"фаренгейт\w*)", re.IGNORECASE)


@lru_cache(maxsize=8192)
def stated(text: str, language: str, claim_side: bool = False) -> tuple[Stated, ...]:
    """The facts of ``text`` (one sentence), read for comparison. ``claim_side`` facts are those to check: numbers
    in words that count a noun are read on the evidence side only, where they can support a claim's digits."""
    facts = [f for f in extract_facts(text, language, discover_names=claim_side)
             if not (f.kind == "number" and _REFERENCE.search(text, 0, f.start))]
    extras = [Fact("number", f"{e.value:g} {e.unit}", text[e.start:e.end], e.start, e.end, e.value, e.unit)
              for e in extra_quantities(text)]
    if not claim_side:
        extras += _word_counts(text, language)
    for extra in extras:
        if not any(f.start < extra.end and extra.start < f.end for f in facts):
            facts.append(extra)
    facts = sorted((_clock(text, _as_year(f)) for f in facts), key=lambda f: f.start)
    words = anchors.content_words(text, language)
    spans = _ranges(text, facts)
    out = []
    for i, fact in enumerate(facts):
        near = anchors.near(words, fact.start, fact.end)
        counts = anchors.counted(words, fact.start, fact.end, text, language) if fact.kind == "number" else frozenset()
        span, bounded = None, None
        if fact.kind == "number" and fact.value is not None:
            if i in spans:
                span, bounded = spans[i], "range"
            else:
                bounded = bound_of(text, fact.start, fact.end)
                span = interval(fact.value, bounded)
        close = anchors.near(words, fact.start, fact.end, window=1)
        out.append(Stated(fact, span, bounded, near, counts, _scale(text, fact), close))
    return tuple(out)


def _as_year(fact: Fact) -> Fact:
    """'1987年开放' reads as 1987 years (no word boundary after 年): it is the year 1987."""
    if fact.kind == "number" and fact.unit == "year" and fact.value is not None and fact.value.is_integer() \
            and 1000 <= fact.value <= 2100 and "年" in fact.text and "周年" not in fact.text:
        return replace(fact, kind="year", key=f"{int(fact.value)}", unit=None)
    return fact


def _clock(text: str, fact: Fact) -> Fact:
    """"8 утра" is 08:00 and "8 вечера" 20:00: a time of day, not a count of mornings."""
    number = re.match(r"\d+", fact.text)
    m = _RU_CLOCK.match(text, fact.start + number.end()) if number else None
    if fact.kind != "number" or fact.value is None or m is None or not fact.value.is_integer() or not 0 < fact.value <= 12:
        return fact
    hour = int(fact.value) % 12 + (12 if m.group(1).lower() == "вечера" else 0)  # "4 дня" is as often 4 days
    return Fact("time", f"{hour:02d}:00", text[fact.start:m.end()], fact.start, m.end())


def _word_counts(text: str, language: str) -> list[Fact]:
    """"шесть рейсов", "six flights", "六个": numbers in words with a counted noun, which text.facts leaves
    out as too often idioms in an answer, but which in the evidence can state what an answer writes in digits."""
    out = []
    for m in WORD_NUMBER.finditer(text):
        unit, end = unit_after(text, m.end(), language)
        if unit == COUNT:
            value = float(word_value(m))
            out.append(Fact("number", f"{value:g} {COUNT}", text[m.start():end], m.start(), end, value, COUNT))
    for m in ZH_NUMBER.finditer(text):
        zh = zh_value(m.group("zh"))
        if zh is not None and text[m.end():m.end() + 1] in ZH_CLASSIFIERS:
            value = float(zh)
            out.append(Fact("number", f"{value:g} {COUNT}", text[m.start():m.end() + 1], m.start(), m.end() + 1,
                            value, COUNT))
    return out


def _scale(text: str, fact: Fact) -> str | None:
    if fact.unit != "degree":
        return None
    number = _LEADING_NUMBER.match(fact.text)  # always matches, maybe empty
    m = _SCALE.search(fact.text[number.end() if number else 0:] + text[fact.end:fact.end + 14])
    if m is None:
        return None
    s = m.group("s").lower()
    return "F" if s.startswith(("f", "℉", "ф")) else "C"


def _ranges(text: str, facts: list[Fact]) -> dict[int, Interval]:
    """Both ends of "2-4 floors", "between 2 and 4", "от 2 до 4": each read as the whole range."""
    out: dict[int, Interval] = {}
    for i in range(len(facts) - 1):
        a, b = facts[i], facts[i + 1]
        if a.kind == b.kind == "number" and a.value is not None and b.value is not None and a.value < b.value \
                and (a.unit == b.unit or a.unit is None) and is_range(text, a.end, b.start, a.start):
            out[i] = out[i + 1] = Interval(a.value, b.value)
    return out
