"""The cross-encoder computed in float64 with numpy from a shipped graph's weights: the reference the
shipped graph's float32 arithmetic is held to (tests/detector/test_numerics.py, benchmarks/detector_numerics.py,
and the check windows stored beside the model: groundtrace/detector/numerics.py).

The same network as export.build_graph and model.CrossEncoder (post-LN BERT, exact GELU, padding
masked by an additive -1e4), with nothing fused or reordered for speed: about 0.5 s per 512-token
window on one core.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.special import erf

from groundtrace.detector.crossencoder import ONNX_FILE, CrossEncoder
from groundtrace.detector.windows import Window
from xe import from_onnx


class Reference:
    def __init__(self, onnx_file: Path) -> None:
        state, self.config = from_onnx.read_state(onnx_file)
        self.w = {k: v.astype(np.float64) for k, v in state.items()}

    def probabilities(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """P(unsupported) per position, [batch, tokens], float64."""
        w, c = self.w, self.config
        hidden, heads = c["hidden"], c["heads"]
        size = hidden // heads
        batch, tokens = ids.shape
        x = _norm(w["word.weight"][ids] + w["pos.weight"][:tokens][None] + w["type_emb"], w["ln.weight"], w["ln.bias"], c["eps"])
        bias = ((1.0 - mask.astype(np.float64)) * -1e4)[:, None, None, :]
        for i in range(c["layers"]):
            p = f"layers.{i}."
            linear = lambda y, n, p=p: y @ w[p + n + ".weight"].T + w[p + n + ".bias"]  # noqa: E731
            split = lambda y: y.reshape(batch, tokens, heads, size).transpose(0, 2, 1, 3)  # noqa: E731
            q, k, v = split(linear(x, "q")), split(linear(x, "k")), split(linear(x, "v"))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, hidden)
            x = _norm(x + linear(ctx, "ao"), w[p + "aln.weight"], w[p + "aln.bias"], c["eps"])
            h = linear(x, "fi")
            x = _norm(x + linear(0.5 * h * (1.0 + erf(h / math.sqrt(2.0))), "fo"), w[p + "oln.weight"], w[p + "oln.bias"], c["eps"])
        logit = x @ w["head.weight"][0] + w["head.bias"][0]
        return 1.0 / (1.0 + np.exp(-logit))


def _norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class ReferenceEncoder(CrossEncoder):
    """The shipped encoder's tokenizer and windows, P(unsupported) from the float64 reference: the
    `grounding` metric as the model computes it (memoized: other graphs read the same windows)."""

    def __init__(self, onnx_file: Path = ONNX_FILE) -> None:
        super().__init__(onnx_file)
        self.reference = Reference(onnx_file)
        self.memo: dict[bytes, np.ndarray] = {}

    def window_probabilities(self, windows: list[Window]) -> list[np.ndarray]:
        out = []
        for w in windows:
            ids = np.asarray(w.ids, np.int64)
            key = ids.tobytes()
            if key not in self.memo:
                self.memo[key] = self.reference.probabilities(ids[None], np.ones((1, len(ids)), np.int64))[0]
            out.append(self.memo[key])
        return out
