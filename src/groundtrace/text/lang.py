"""Guess the language of a text from its script, then from its function words."""

from __future__ import annotations

import re

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_LATIN_WORD = re.compile(r"[a-z\u00e0-\u024f]+")

# The commonest function words of Latin-script languages: enough to tell them apart on a sentence.
_FUNCTION_WORDS = {
    "en": {"the", "and", "of", "to", "is", "in", "that", "it", "for", "was", "on", "are", "with", "as", "this"},
    "de": {"der", "die", "und", "das", "ist", "nicht", "ein", "eine", "zu", "den", "mit", "von", "sich", "auf"},
    "fr": {"le", "la", "les", "et", "des", "est", "une", "un", "du", "que", "pour", "dans", "pas", "sur", "au"},
    "es": {"el", "la", "los", "las", "y", "es", "que", "del", "en", "por", "una", "con", "para", "se", "no"},
    "it": {"il", "di", "che", "è", "la", "per", "un", "una", "non", "sono", "gli", "del", "della", "con"},
    "pt": {"o", "os", "que", "não", "uma", "um", "do", "da", "em", "para", "com", "são", "dos", "das"},
}

_SAMPLE = 4000  # characters: the script mix of a text shows in its first few thousand


def guess_language(text: str | None, default: str = "en") -> str:
    """An ISO 639-1 code: 'zh', 'ru', 'en', or another Latin-script language; ``default`` if unsure."""
    if not text:
        return default
    sample = text[:_SAMPLE]
    han = len(_HAN.findall(sample))
    kana = len(_KANA.findall(sample))
    hangul = len(_HANGUL.findall(sample))
    cyrillic = len(_CYRILLIC.findall(sample))
    latin = len(_LATIN.findall(sample))
    letters = han + kana + hangul + cyrillic + latin
    if letters == 0:
        return default
    if kana and kana + han >= 0.3 * letters:
        return "ja"
    # One Chinese character carries as much as a whole Latin word: a Chinese answer that quotes an
    # English product name is still Chinese.
    if han >= 0.15 * letters:
        return "zh"
    if hangul >= 0.3 * letters:
        return "ko"
    if cyrillic >= latin:
        return "ru"
    return _latin_language(sample, default)


def _latin_language(sample: str, default: str) -> str:
    tokens = _LATIN_WORD.findall(sample.lower())
    if not tokens:
        return default
    hits = {lang: sum(t in words for t in tokens) for lang, words in _FUNCTION_WORDS.items()}
    best = max(hits, key=hits.__getitem__)
    # Ties and near-misses go to the default: a wrong language costs more than a generic one.
    return best if hits[best] > hits.get(default, 0) else default
