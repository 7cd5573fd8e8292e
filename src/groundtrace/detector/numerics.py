"""Does the shipped detector compute here what it computes on every CPU?

The graph stores its weights int8 and computes in float32 (training/xe/export.py): no integer kernel
whose rounding or saturation depends on the instruction set, so its token probabilities differ between
CPUs only by float32 rounding. ``check()`` runs the graph on its check windows (grounding-xe-check.npz:
fixed en/ru/zh inputs, short and window-filling, tokenized, with P(unsupported) computed in float64
from the same weights by training/xe/reference.py) and compares every position with the reference,
within the tolerance the model card states. `groundtrace metrics --check` runs it.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from groundtrace.detector.crossencoder import MODEL_DIR, CrossEncoder

CHECK_FILE = MODEL_DIR / "grounding-xe-check.npz"
@dataclass(frozen=True)
class CheckResult:
    windows: int
    positions: int
    max_difference: float  # |graph - float64 reference|, the largest over every position
    tolerance: float
    instruction_set: str

    @property
    def ok(self) -> bool:
        return self.max_difference <= self.tolerance


def instruction_set() -> str:
    """This CPU as its kernels see it, e.g. 'x86_64 AVX-512 + VNNI', 'x86_64 AVX2' or 'aarch64 NEON + dot
    product': the features numpy's runtime dispatch found (onnxruntime picks its kernels the same way)."""
    import importlib

    try:
        found = importlib.import_module("numpy._core._multiarray_umath").__cpu_features__
    except ImportError:  # numpy < 2
        found = importlib.import_module("numpy.core._multiarray_umath").__cpu_features__
    widest = next((name for key, name in (("AVX512F", "AVX-512"), ("AVX2", "AVX2"), ("AVX", "AVX"), ("SSE42", "SSE4.2"),
                                          ("SVE", "SVE"), ("ASIMD", "NEON")) if found.get(key)), "no vector extension")
    extra = [name for key, name in (("AVX512VNNI", "VNNI"), ("AVXVNNI", "VNNI"), ("ASIMDDP", "dot product"))
             if found.get(key) and not (key == "AVXVNNI" and found.get("AVX512VNNI"))]
    return " + ".join([f"{platform.machine()} {widest}", *extra])


def check_windows(max_tokens: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(token ids, reference P(unsupported)) of each check window, those of at most ``max_tokens`` only."""
    with np.load(CHECK_FILE) as f:
        ids, lengths, reference = f["ids"].astype(np.int64), f["lengths"], f["reference"]
    ends = np.cumsum(lengths)
    windows = [(ids[e - n:e], reference[e - n:e]) for n, e in zip(lengths, ends, strict=True)]
    return [w for w in windows if max_tokens is None or len(w[0]) <= max_tokens]


def check(tolerance: float, model: CrossEncoder | None = None, max_tokens: int | None = None) -> CheckResult:
    """The shipped graph (or ``model``) on the check windows, one at a time, against the reference."""
    from groundtrace.detector.windows import Window

    model = model or CrossEncoder()
    windows = check_windows(max_tokens)
    computed = model.window_probabilities([Window(ids, 0, np.zeros(0, np.int64)) for ids, _ in windows])
    worst = max(float(np.abs(p.astype(np.float64) - ref).max()) for p, (_, ref) in zip(computed, windows, strict=True))
    return CheckResult(len(windows), sum(len(ids) for ids, _ in windows), worst, tolerance, instruction_set())
