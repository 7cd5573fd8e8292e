"""Word tokens with character offsets, so that anything found in a token can be pointed at."""

from __future__ import annotations

import logging
import re
import threading
from typing import NamedTuple

# A number keeps its inner separators ("1 879", "3,5", "2024-03-05" stays in pieces on '-'), a word
# keeps inner hyphens and apostrophes ("state-of-the-art", "don't"); punctuation never sticks.
_WORD = re.compile(
    r"\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?:[.,]\d+)?(?!\d)"
    r"|\d+(?:[.,]\d+)*"
    r"|[^\W\d_]+(?:['’\-][^\W\d_]+)*"
    r"|[^\W_]+"
)
_HAS_WORD_CHAR = re.compile(r"[^\W_]")

_jieba_lock = threading.Lock()
_jieba_ready = False


class Token(NamedTuple):
    text: str
    start: int
    end: int


def jieba_module():
    """jieba with its dictionary loaded (once, thread-safely)."""
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:  # the dictionary loads once, ~1 s; concurrent first calls must not race
            if not _jieba_ready:
                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba_ready = True
    return jieba


def tokenize(text: str, language: str = "en") -> list[Token]:
    """Word tokens of ``text`` with [start, end) offsets; jieba segments Chinese."""
    if not text:
        return []
    if language == "zh":
        return [
            Token(word, start, end)
            for word, start, end in jieba_module().tokenize(text)
            if _HAS_WORD_CHAR.search(word)
        ]
    return [Token(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def words(text: str, language: str = "en") -> list[str]:
    """Lowercased word tokens (ё folded to е, so Russian spellings with and without it agree)."""
    return [fold(token.text) for token in tokenize(text, language)]


def fold(word: str) -> str:
    return word.casefold().replace("ё", "е")


def terms(text: str, language: str = "en") -> list[Token]:
    """Tokens in comparable form: folded case, and numbers written one way ("1 879" -> "1879")."""
    from groundtrace.text.numbers import canonical_number, parse_number

    out = []
    for word, start, end in tokenize(text, language):
        if word[0].isdigit():
            value = parse_number(word, language)
            word = canonical_number(value) if value is not None else word
        else:
            word = word.casefold().replace("ё", "е")
        out.append(Token(word, start, end))
    return out
