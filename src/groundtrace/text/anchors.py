"""What a fact is about: the content words near it in its sentence, as stems, so that "opened in 1987"
and "opened in 1978" are seen to date the same event and "3 floors" and "5 rooms" to count different things.

A stem is crude on purpose: it must agree across inflections ("этажа", "этажей"; "floor", "floors";
"opened", "opening"), and a near miss only makes two facts look unrelated, never the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from groundtrace.text.numbers import MONTHS
from groundtrace.text.numerals import WORD_VALUES
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import fold, tokenize
from groundtrace.text.units import UNIT_OF

_HAN = re.compile(r"[\u4e00-\u9fff]")
_CYRILLIC = re.compile(r"[а-я]")
_HAN_NUMERAL = re.compile(r"^[零〇一二两三四五六七八九十百千万亿第几多余半]+")
# Words too general to say what a number is about: they stand near numbers of every kind.
_GENERAL = frozenset(
    "total number amount about approximately around least more than less over under only also including"
    " всего общей общая общий около примерно более менее число количество также только"
    " 总共 一共 总数 数量 大约 左右 以上 以下 超过 其中 包括 目前 已经 分别".split()
)
# English function words: stopwords-iso's English list also holds "opened", "came", "large", which are
# exactly the words that say what a number is about.
_EN_FUNCTION = frozenset(
    "the a an and or but nor of to in on at by for with from into onto upon about above below over under after"
    " before between through during without within than then that this these those there here where when which"
    " who whom whose what why how is are was were be been being am has have had having do does did doing will"
    " would shall should can could may might must it its it's they them their theirs we us our you your he him"
    " his she her hers i me my mine not no yes so as if also just only very too any all some each both either"
    " neither such same other another more most less least much many few per via etc".split()
)
_SUFFIXES = ("ings", "ing", "ies", "ied", "es", "ed", "s", "ly")


def stem(word: str) -> str:
    """A comparable form of a (folded) word: 'floors' -> 'floor', 'этажей' -> 'этаж', Chinese words as they are."""
    if _HAN.search(word):
        return word
    if _CYRILLIC.search(word):
        return word[:4] if len(word) <= 6 else word[:5]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    return word[:6]


@dataclass(frozen=True, slots=True)
class Word:
    stem: str
    start: int
    end: int


@lru_cache(maxsize=8192)
def content_words(text: str, language: str) -> tuple[Word, ...]:
    """The content words of a sentence with their offsets: no function words, numbers, units or months."""
    stop = _EN_FUNCTION | (stopwords(language) if language != "en" else frozenset())
    out = []
    for token in tokenize(text, "zh" if language in ("zh", "ja") else "en"):
        word = fold(token.text)
        if not _is_content(word, stop):
            continue
        out.append(Word(stem(word), token.start, token.end))
    return tuple(out)


def _is_content(word: str, stop: frozenset[str]) -> bool:
    if word[0].isdigit() or word in stop or word in _GENERAL or word in UNIT_OF or word in MONTHS:
        return False
    if word in WORD_VALUES:
        return False
    if _HAN.search(word):
        return len(word) >= 2 and not _HAN_NUMERAL.match(word) and not any(c.isdigit() for c in word)
    return len(word) >= 3 and word.isalpha() or len(word) >= 3 and "-" in word


def near(words: tuple[Word, ...], start: int, end: int, window: int = 4) -> frozenset[str]:
    """Stems of the ``window`` content words nearest a fact on each side, and of any inside it
    (the counted noun of "3 floors")."""
    before = [w for w in words if w.end <= start][-window:]
    inside = [w for w in words if start <= w.start and w.end <= end]
    after = [w for w in words if w.start >= end][:window]
    return frozenset(w.stem for w in before + inside + after)


def counted(words: tuple[Word, ...], start: int, end: int, text: str, language: str) -> frozenset[str]:
    """What a count counts: the nouns inside the fact ("3 floors"), or for Chinese its measure word and
    the word after it ("3层楼": 层, 楼)."""
    inside = frozenset(w.stem for w in words if start <= w.start and w.end <= end)
    if inside:
        return inside
    if language in ("zh", "ja"):
        after = [w.stem for w in words if w.start >= end][:1]
        classifier = text[end - 1 : end] if end > start and _HAN.match(text[end - 1 : end]) else ""
        classifier = "" if classifier == "个" else classifier  # 个 counts anything: the noun after it says what
        return frozenset(x for x in [classifier, *after] if x)
    return frozenset()
