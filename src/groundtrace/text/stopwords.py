"""Stopword lists from stopwords-iso (the ``stopwordsiso`` package ships them; no download)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def stopwords(language: str) -> frozenset[str]:
    """Lowercased stopwords of a language; empty for a language stopwords-iso does not know."""
    import stopwordsiso

    if not stopwordsiso.has_lang(language):
        return frozenset()
    return frozenset(word.lower() for word in stopwordsiso.stopwords(language))
