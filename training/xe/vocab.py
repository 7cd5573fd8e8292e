"""Prune XLM-R's 250k-piece vocabulary to the pieces en/ru/zh text uses, and write the tokenizer files.

The pruned model keeps the special ids 0-3 (<s>, <pad>, </s>, <unk>), every piece that occurs when
a corpus of English, Russian and Chinese text is tokenized with the *full* vocabulary, and every
single-character piece of the Latin, Cyrillic and CJK ranges (so that rarer words still split
into known pieces instead of <unk>). Output: ``tokenizer.model`` (SentencePiece, identity
normaliser), ``normalizer.json`` (XLM-R's per-character map) and ``kept_ids.npy`` (old id of each
new id, to slice the word embeddings).
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from xe.e5_file import E5File


def sentencepiece_model(e5: E5File, keep: np.ndarray | None = None) -> bytes:
    """A SentencePiece unigram model of the e5 pieces (all of them, or the ``keep`` ids in order)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    ids = np.arange(len(e5.pieces)) if keep is None else keep
    model = pb.ModelProto()
    special = {e5.special["bos"]: pb.ModelProto.SentencePiece.CONTROL,
               e5.special["eos"]: pb.ModelProto.SentencePiece.CONTROL,
               e5.special["pad"]: pb.ModelProto.SentencePiece.CONTROL,
               e5.special["unk"]: pb.ModelProto.SentencePiece.UNKNOWN}
    for old in ids:
        piece = model.pieces.add()
        piece.piece = e5.pieces[old]
        piece.score = float(e5.scores[old])
        piece.type = special.get(int(old), pb.ModelProto.SentencePiece.NORMAL)
    spec = model.trainer_spec
    spec.model_type = pb.TrainerSpec.UNIGRAM
    spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id = 3, 0, 2, 1
    spec.vocab_size = len(ids)
    norm = model.normalizer_spec
    norm.name = "identity"
    norm.add_dummy_prefix = True
    norm.remove_extra_whitespaces = True
    norm.escape_whitespaces = True
    return model.SerializeToString()


def _wanted_char(piece: str) -> bool:
    text = piece.lstrip("\u2581")
    if len(text) != 1:
        return False
    cp = ord(text)
    name = unicodedata.name(text, "")
    return (cp < 0x250 or 0x400 <= cp < 0x530 or 0x3000 <= cp < 0x30FF or 0x4E00 <= cp < 0xA000
            or 0xFF00 <= cp < 0xFFF0 or "DIGIT" in name or "PUNCTUATION" in name or 0x2000 <= cp < 0x2070)


def prune(e5: E5File, texts: Iterable[str], out: Path) -> dict:
    import sentencepiece as spm

    out.mkdir(parents=True, exist_ok=True)
    full = spm.SentencePieceProcessor(model_proto=sentencepiece_model(e5))
    table = {cp: rep for cp, rep in e5.norm_map.items()}
    counts: Counter[int] = Counter()
    n_texts = 0
    for text in texts:
        counts.update(full.encode(text.translate(table)))
        n_texts += 1
    seen = set(counts)
    chars = {i for i, p in enumerate(e5.pieces) if _wanted_char(p)}
    keep = sorted({0, 1, 2, 3} | seen | chars)
    keep_arr = np.asarray(keep, dtype=np.int64)
    (out / "tokenizer.model").write_bytes(sentencepiece_model(e5, keep_arr))
    (out / "normalizer.json").write_text(json.dumps({str(k): v for k, v in sorted(e5.norm_map.items())},
                                                    ensure_ascii=False), encoding="utf-8")
    np.save(out / "kept_ids.npy", keep_arr)
    stats = {"texts": n_texts, "tokens": int(sum(counts.values())), "ids_seen": len(seen),
             "single_char_ids": len(chars), "kept": len(keep)}
    (out / "vocab_stats.json").write_text(json.dumps(stats, indent=1))
    return stats
