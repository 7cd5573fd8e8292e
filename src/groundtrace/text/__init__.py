"""Language-aware text utilities for Russian, English and Chinese (and a sane fallback for others)."""

from groundtrace.text.lang import guess_language
from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import Token, terms, tokenize, words

__all__ = ["Token", "guess_language", "split_sentences", "stopwords", "terms", "tokenize", "words"]
