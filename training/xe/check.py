"""The detector's check windows: fixed inputs in en/ru/zh, short and window-filling, tokenized into the
shipped reading's windows, with the float64 reference's P(unsupported) for every position
(reference.py). Stored beside the model (groundtrace/detector/grounding-xe-check.npz) so that any CPU
can compare the shipped graph with the reference (groundtrace.detector.numerics, ``groundtrace metrics
--check``) without torch, scipy or the training data.

    python training/xe/build.py check     # after every export or repack
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from xe.reference import Reference

ROOT = Path(__file__).resolve().parents[2]
PARAPHRASE = ROOT / "benchmarks" / "data"

SHORT = [  # (question, contexts, answer): one faithful and one not per language, as a user's first try
    (None, ["Paris is the capital of France."], "Paris is in Germany."),  # the shortest: checked under emulation
    ("How long do refunds take?", ["Refunds are paid within 14 days of the return reaching our warehouse."],
     "Refunds are paid within 30 days."),
    ("How long do refunds take?", ["Refunds are paid within 14 days of the return reaching our warehouse."],
     "Refunds are paid within 14 days of the return reaching the warehouse."),
    ("Сколько стоит абонемент?", ["Годовой абонемент в бассейн стоит 12 000 рублей, для студентов — 8 000 рублей."],
     "Абонемент стоит 15 000 рублей."),
    ("退款需要多久？", ["退货到达仓库后14天内退款。"], "退货到达仓库后30天内退款，运费全免。"),
]


def long_inputs() -> list[tuple[str | None, list[str], str]]:
    """Per language, a planted-error answer of the paraphrase dev set read against its own passages and
    the next two pairs' (more than one 512-token window)."""
    out = []
    for language in ("en", "ru", "zh"):
        rows = [json.loads(line) for line in open(PARAPHRASE / f"paraphrase_{language}.jsonl", encoding="utf-8")]
        planted = next(r for r in rows if r["label"] == 1)
        contexts = [c for r in rows[:6] if r["label"] == 0 for c in r["contexts"]]
        out.append((planted.get("question"), contexts, planted["answer"]))
    return out


def write(onnx_file: Path, out: Path) -> dict:
    from groundtrace.detector.crossencoder import CrossEncoder

    encoder, reference = CrossEncoder(onnx_file), Reference(onnx_file)
    windows = [w for question, contexts, answer in SHORT + long_inputs()
               for w in encoder.full_windows(question, contexts, answer)[1]]
    ids = [np.asarray(w.ids, np.int64) for w in windows]
    p = [reference.probabilities(i[None], np.ones((1, len(i)), np.int64))[0] for i in ids]
    np.savez_compressed(out, ids=np.concatenate(ids).astype(np.int32), lengths=np.asarray([len(i) for i in ids], np.int32),
                        reference=np.concatenate(p))
    return {"windows": len(ids), "tokens": [len(i) for i in ids]}
