"""Checkable facts in a text: numbers and quantities, dates and years, times of day, names and acronyms.

A fact of the answer is *supported* when the contexts state the same thing in any of its written
forms: the same value (and a compatible unit), the same date, the same time of day ("9:00 am" is
"09:00", text.times), or a name whose words all occur there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from groundtrace.text.numbers import MONTHS, canonical_number, find_dates, find_quantities
from groundtrace.text.stopwords import stopwords
from groundtrace.text.times import find_times
from groundtrace.text.tokenize import fold, jieba_module, tokenize
from groundtrace.text.units import COUNT, is_unit_word, units_agree

FactKind = Literal["number", "year", "date", "time", "name"]


@dataclass(frozen=True, slots=True)
class Fact:
    kind: FactKind
    key: str  # canonical form; two facts with the same key say the same thing
    text: str
    start: int
    end: int
    value: float | None = None
    unit: str | None = None


# A sentence (or a list item) starts at the beginning, after an end mark, a colon or a line break,
# past quotes, bullets and item numbers.
_SENTENCE_START = re.compile(r"(?:^|[.!?…:。！？：\n])[\s\"'«“(\-–—•*]*(?:\d{1,2}[.)]\s+)?")
# Words after which a number points into the prompt ("Passage 2", "step 3"), not at the world.
_REFERENCE_WORDS = frozenset(
    "passage passages document documents doc source sources context contexts step steps item option"
    " пассаж фрагмент фрагменте документ документе источник источнике контекст контексте шаг пункт"
    " 文档 段落 来源 步骤 资料".split()
)
_REFERENCE_BEFORE = re.compile(r"([^\W\d_]+)\s*(?:#|№|no\.?)?\s*$", re.IGNORECASE)
_CONNECTORS = frozenset("of de la le du von van der den da di del al bin и".split())
# Capitalised words that are units or weekdays, never names of things.
_NOT_NAMES = frozenset("fahrenheit celsius kelvin".split())
_WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday понедельник вторник среда четверг пятница"
    " суббота воскресенье".split()
)
# jieba part-of-speech flags of proper nouns: person, place, organisation, other proper noun.
_ZH_NAME_FLAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz"})
_CYRILLIC = re.compile(r"[а-яё]")
_BLANK = re.compile(r"[ \t\u00a0]+")  # words of one name stand on one line
_NOT_ALNUM = re.compile(r"[\W_]+")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def extract_facts(text: str, language: str = "en", *, discover_names: bool = True) -> list[Fact]:
    """All facts of ``text``, in order of appearance, none overlapping another.

    ``discover_names`` lets jieba's HMM find Chinese names missing from its dictionary; it is 10x
    slower, and a context does not need it: an answer's Chinese name is looked up in the context's
    text, not among the context's extracted names.
    """
    if not text:
        return []
    facts: list[Fact] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return not any(s < end and start < e for s, e in taken)

    def add(fact: Fact) -> None:
        facts.append(fact)
        taken.append((fact.start, fact.end))

    for date in find_dates(text, language):
        kind: FactKind = "year" if date.key.isdigit() else "date"
        add(Fact(kind, date.key, text[date.start : date.end], date.start, date.end,
                 value=float(date.year) if kind == "year" and date.year is not None else None))
    # before the numbers: "9:00" is one time, not the numbers 9 and 00
    for time in find_times(text):
        if free(time.start, time.end):
            add(Fact("time", time.key, text[time.start : time.end], time.start, time.end))
    for name in _names(text, language, discover_names):
        if free(name.start, name.end):
            add(name)
    for q in find_quantities(text, language):
        if not free(q.start, q.end) or _is_list_marker(text, q.start, q.end) or _is_reference(text, q.start):
            continue
        number = text[q.start:q.end]
        # "in 2019", "2019 sales": a year, whatever it is said to count
        if q.unit in (None, COUNT) and q.value.is_integer() and 1000 <= q.value <= 2100 and "." not in number:
            end = q.start + len(number.split()[0]) if q.unit else q.end
            add(Fact("year", canonical_number(q.value), text[q.start:end], q.start, end, q.value, None))
            continue
        key = canonical_number(q.value) + (f" {q.unit}" if q.unit else "")
        add(Fact("number", key, number, q.start, q.end, q.value, q.unit))
    return sorted(facts, key=lambda f: f.start)


def _is_reference(text: str, start: int) -> bool:
    before = _REFERENCE_BEFORE.search(text, max(0, start - 24), start)
    return before is not None and fold(before.group(1)) in _REFERENCE_WORDS


def _is_list_marker(text: str, start: int, end: int) -> bool:
    """'1.' or '2)' opening a line is numbering, not a fact."""
    line_start = text.rfind("\n", 0, start) + 1
    return not text[line_start:start].strip() and text[end : end + 1] in {".", ")"} and text[end + 1 : end + 2] in {" ", ""}


def _names(text: str, language: str, discover: bool) -> list[Fact]:
    if language in ("zh", "ja"):
        return _han_names(text, discover) + _latin_names(text, language)
    return _latin_names(text, language)


def _latin_names(text: str, language: str) -> list[Fact]:
    """Acronyms, and runs of capitalised words that do not merely open a sentence."""
    starts = {m.end() for m in _SENTENCE_START.finditer(text)}
    stop = stopwords(language) | stopwords("en")
    tokens = [t for t in tokenize(text, "en") if not t.text[0].isdigit()]
    names: list[Fact] = []
    run: list = []

    def close() -> None:
        while run and fold(run[-1].text) in _CONNECTORS:
            run.pop()
        # A sentence's first word is capitalised anyway ("The", "Residents"): it proves nothing.
        if run and run[0].start in starts and not _is_acronym(run[0].text):
            run.pop(0)
        while run and fold(run[0].text) in _CONNECTORS:
            run.pop(0)
        # a lone capitalised function word ("What", "Unable") or a prompt word ("Passage") is no name
        # nor a unit ("5 USD", "10 KM"): the number before it is the fact
        if len(run) == 1 and (fold(run[0].text) in stop or fold(run[0].text) in _REFERENCE_WORDS
                              or is_unit_word(run[0].text)):
            run.clear()
        if run:
            start, end = run[0].start, run[-1].end
            names.append(Fact("name", _name_key(text[start:end]), text[start:end], start, end))
        run.clear()

    for token in tokens:
        word = token.text
        capitalised = (word[0].isupper() or (not word.islower() and _is_acronym(word))) and (
            fold(word) not in MONTHS and fold(word) not in _WEEKDAYS and fold(word) not in _NOT_NAMES
        )
        joins = bool(run) and _BLANK.fullmatch(text[run[-1].end : token.start]) is not None
        if capitalised and len(word) > 1:
            if run and not joins:
                close()
            run.append(token)
        elif run and joins and fold(word) in _CONNECTORS:
            run.append(token)
        else:
            close()
    close()
    return names


def _is_acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and sum(c.isupper() for c in letters) >= 2


def _han_names(text: str, discover: bool) -> list[Fact]:
    jieba_module()  # loads the dictionary once, thread-safely
    import jieba.posseg

    names = []
    offset = 0
    for pair in jieba.posseg.cut(text, HMM=discover):
        word, flag = pair.word, pair.flag
        if flag in _ZH_NAME_FLAGS and len(word) >= 2 and _HAN.search(word):
            names.append(Fact("name", fold(word), word, offset, offset + len(word)))
        offset += len(word)
    return names


def _name_key(name: str) -> str:
    return " ".join(fold(name).replace("’", "'").removesuffix("'s").split())


def _stems(word: str) -> list[str]:
    """Prefixes under which an inflected (Cyrillic) word can still be recognised."""
    return [word[:i] for i in range(4, len(word) + 1)]


def _stem(word: str) -> str:
    return word[: max(4, len(word) - 3)]


@dataclass
class FactIndex:
    """What a text states, indexed for the question 'does it support this fact?'."""

    facts: list[Fact]
    text: str
    language: str
    values: dict[float, set[str | None]] = field(default_factory=dict)
    years: set[int] = field(default_factory=set)
    dates: set[str] = field(default_factory=set)
    times: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)
    folded: str = ""
    squashed: str = ""  # folded text without spaces or punctuation: "E-Z Pass" finds "E-ZPass"

    @classmethod
    def build(cls, text: str, language: str, facts: list[Fact] | None = None) -> FactIndex:
        facts = extract_facts(text, language, discover_names=False) if facts is None else facts
        folded = fold(text)
        index = cls(facts, text, language, folded=folded, squashed=_NOT_ALNUM.sub("", folded))
        for fact in facts:
            if fact.value is not None:
                index.values.setdefault(fact.value, set()).add(fact.unit)
            if fact.kind == "time":
                index.times.add(fact.key)
            if fact.kind in ("date", "year"):
                index.dates.add(fact.key)
                year = fact.key[:4]
                if year.isdigit():
                    index.years.add(int(year))
        for token in tokenize(text, "en" if language not in ("zh", "ja") else language):
            word = fold(token.text)
            index.words.add(word)
            if _CYRILLIC.search(word):
                index.prefixes.update(_stems(word))
        return index

    def supports(self, fact: Fact) -> bool:
        if fact.kind == "name":
            return self._has_name(fact.key)
        if fact.kind == "date":
            return self._has_date(fact.key)
        if fact.kind == "time":  # the same time, or the same minute stated to the second
            return fact.key in self.times or any(t.startswith(fact.key + ":") for t in self.times)
        # numbers and years: the same value in a unit that can name the same thing ("5 years" is not
        # supported by "5 business days"), or a date in that year
        units = self.values.get(fact.value) if fact.value is not None else None
        if units is not None and any(units_agree(fact.unit, unit) for unit in units):
            return True
        return (fact.unit in (None, COUNT) and fact.value is not None and fact.value.is_integer()
                and int(fact.value) in self.years)

    def _has_date(self, key: str) -> bool:
        # the same date, or a more precise one that contains it ("March 2024" by "5 March 2024")
        if key in self.dates or any(d.startswith(key + "-") for d in self.dates):
            return True
        if key.startswith("--"):  # a day (and month) without a year: any date with them will do
            return any(d.endswith("-" + key.lstrip("-")) for d in self.dates)
        year, rest = key[:4], key[4:]
        # a full date is supported by the same month/day stated with the year given elsewhere
        return int(year) in self.years and any(d.startswith("-") and d[1:] == rest for d in self.dates)

    def _has_name(self, key: str) -> bool:
        if _HAN.search(key):
            return key in self.folded
        parts = [w for w in re.findall(r"[^\W_]+", key) if len(w) > 1] or [key]
        if all(self._has_word(w) for w in parts):
            return True
        squashed = _NOT_ALNUM.sub("", key)
        return len(squashed) >= 4 and squashed in self.squashed

    def _has_word(self, word: str) -> bool:
        if word in self.words:
            return True
        return bool(_CYRILLIC.search(word)) and _stem(word) in self.prefixes


@lru_cache(maxsize=2048)
def context_index(text: str, language: str) -> FactIndex:
    """The facts of a context, indexed (cached: a monitored app asks about the same passages again and again)."""
    return FactIndex.build(text, language)


def unique_by_key(facts: list[Fact]) -> list[Fact]:
    seen: dict[str, Fact] = {}
    for fact in facts:
        seen.setdefault(f"{fact.kind}:{fact.key}", fact)
    return list(seen.values())
