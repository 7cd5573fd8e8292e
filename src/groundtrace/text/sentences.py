"""Sentence splitting with offsets, for Russian, English and Chinese."""

from __future__ import annotations

import re

from groundtrace.text.tokenize import Token

# Abbreviations that stand before a name or a number: a full stop after them never ends a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs e.g i.e no fig approx dept jan feb mar apr jun jul aug sep sept oct nov dec"
    " т.е т.к др пр г ул д им проф см стр рис напр ок".split()
)
# Others (etc., руб., млн.) end a sentence when a capitalised word follows, as the general rule says.
# A sentence ends at . ! ? … (and their CJK forms), with closing quotes or brackets allowed after.
_END = re.compile(r"(?:[.!?…]+|[。！？；]+)[\"'”’»)\]）」』]*")
_NEXT_STARTS_SENTENCE = re.compile(r"\s+(?=[\"'“‘«(\[（「『]?[^\W\d_a-zа-яё]|\d)|\s*$|(?<=[。！？；])")


def split_sentences(text: str) -> list[Token]:
    """Sentences of ``text`` with [start, end) offsets; whitespace between them is left out."""
    sentences: list[Token] = []
    start = 0
    for match in _END.finditer(text):
        end = match.end()
        if not _ends_sentence(text, match, end):
            continue
        _append(sentences, text, start, end)
        start = end
    _append(sentences, text, start, len(text))
    # Paragraph breaks end sentences too, even without punctuation (lists, headings).
    return [piece for sentence in sentences for piece in _split_lines(text, sentence)]


def _ends_sentence(text: str, match: re.Match[str], end: int) -> bool:
    mark = match.group()
    if mark[0] in "。！？；":
        return True
    if mark[0] == "." and len(mark.rstrip("\"'”’»)]）」』")) == 1:
        word = re.search(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$", text[: match.start()])
        if word and word.group(1).lower() in _ABBREVIATIONS:
            return False
        if word and len(word.group(1)) == 1 and word.group(1).isupper():  # an initial: "J. Smith"
            return False
        if re.search(r"\d$", text[: match.start()]) and re.match(r"\d", text[end:]):  # 3.5
            return False
    return bool(_NEXT_STARTS_SENTENCE.match(text, end))


def _append(sentences: list[Token], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        offset = start + len(piece) - len(piece.lstrip())
        sentences.append(Token(stripped, offset, offset + len(stripped)))


def _split_lines(text: str, sentence: Token) -> list[Token]:
    if "\n" not in sentence.text:
        return [sentence]
    pieces: list[Token] = []
    for match in re.finditer(r"[^\n]+", sentence.text):
        _append(pieces, text, sentence.start + match.start(), sentence.start + match.end())
    return pieces
