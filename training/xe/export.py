"""Write a trained cross-encoder as the shipped graph: weights stored int8, arithmetic in float32.

The graph is built op by op with onnx.helper (no torch exporter involved): embeddings + LayerNorm,
post-LN BERT layers with exact (erf) GELU, a sigmoid token head. Weight matrices are stored int8
per output channel (symmetric), the word embedding uint8 per tensor; inside the graph each is
widened back to float32 by ``Cast`` and ``Mul`` (``Sub`` for a zero point), which onnxruntime folds
into float32 constants when it loads the file. Every product and sum is then float32, on every CPU.

Why not integer arithmetic: grounding-2 first shipped as onnxruntime's dynamic quantization (int8
activations, ``MatMulInteger``). Its token probabilities were up to 0.17 from the float model's, and
they differed between CPUs: without VNNI, x86's u8s8 products add pairs into 16-bit sums that
saturate (microsoft/onnxruntime#6004, #14642), so an AVX2 server and an AVX-512 VNNI laptop
disagreed on verdicts. Why not ``DequantizeLinear``: onnxruntime (1.32) rewrites a weight-only
``DequantizeLinear -> MatMul`` into ``MatMulNBits`` with int8 activations unless the session turns
QDQ handling off (measured: 0.007 from the float model); ``Cast`` and ``Mul`` are only folded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

OPSET = 17
LINEARS = ("q", "k", "v", "ao", "fi", "fo")
# grounding-2's FFN output projections were kept float32 by its first export (for its int8 activations);
# a new export stores every weight matrix int8
FLOAT_WEIGHTS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stored:
    """A tensor kept as integers: ``(q - zero_point) * scale``, the scale per column or per tensor."""

    q: np.ndarray
    scale: np.ndarray  # [] or [columns] (float32)
    zero_point: np.ndarray  # the scale's shape, q's dtype

    def widen(self) -> np.ndarray:
        """float32, computed as the graph computes it (exact integers, one rounding at the scale)."""
        return ((self.q.astype(np.float32) - self.zero_point.astype(np.float32)) * self.scale).astype(np.float32)


Tensor = np.ndarray | Stored


def per_column_int8(w: np.ndarray) -> Stored:
    """Symmetric int8 per output channel of an [in, out] matrix: the largest |w| of a column is 127."""
    scale = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return Stored(q, scale, np.zeros(scale.shape, np.int8))


def per_tensor_uint8(w: np.ndarray) -> Stored:
    """Asymmetric uint8 over the whole tensor, the range widened to hold 0 (the embedding's storage)."""
    low, high = min(float(w.min()), 0.0), max(float(w.max()), 0.0)
    scale = np.float32((high - low) / 255 or 1.0)
    zero = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    q = np.clip(np.rint(w / scale) + zero, 0, 255).astype(np.uint8)
    return Stored(q, np.asarray(scale, np.float32), np.asarray(zero, np.uint8))


def graph_tensors(state: dict[str, np.ndarray], config: dict, float_weights: tuple[str, ...] = FLOAT_WEIGHTS) -> dict[str, Tensor]:
    """The graph's named tensors from a torch state dict: weight matrices [in, out], int8 unless named in
    ``float_weights``; the word embedding uint8; biases, norms and positions float32."""
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    t: dict[str, Tensor] = {"word": per_tensor_uint8(f32(state["word.weight"])), "pos": f32(state["pos.weight"]),
                            "type": f32(state["type_emb"]), "ln_w": f32(state["ln.weight"]), "ln_b": f32(state["ln.bias"]),
                            "head.w": per_column_int8(f32(state["head.weight"]).T), "head.b": f32(state["head.bias"])}
    for i in range(config["layers"]):
        p = f"layers.{i}"
        for name in LINEARS:
            w = f32(state[f"{p}.{name}.weight"]).T
            t[f"{p}.{name}.w"] = f32(w) if name in float_weights else per_column_int8(w)
            t[f"{p}.{name}.b"] = f32(state[f"{p}.{name}.bias"])
        for name in ("aln", "oln"):
            t[f"{p}.{name}.w"], t[f"{p}.{name}.b"] = f32(state[f"{p}.{name}.weight"]), f32(state[f"{p}.{name}.bias"])
    return t


class _Graph:
    def __init__(self) -> None:
        self.nodes, self.inits = [], []
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str | None = None, **attrs) -> str:
        out = name or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def widen(self, name: str, stored: Stored, source: str | None = None) -> str:
        """float32 ``(q - zero_point) * scale`` of ``source`` (default: the stored integers themselves)."""
        q = self.const(f"{name}_quantized", stored.q)
        x = self.op("Cast", [source or q], to=TensorProto.FLOAT)
        if np.any(stored.zero_point):  # a symmetric tensor stores none
            zero = self.const(f"{name}_zero_point", stored.zero_point)
            x = self.op("Sub", [x, self.op("Cast", [zero], to=TensorProto.FLOAT)])
        return self.op("Mul", [x, self.const(f"{name}_scale", stored.scale)], name=name)

    def tensor(self, name: str, value: Tensor) -> str:
        return self.widen(name, value) if isinstance(value, Stored) else self.const(name, value)


def build_graph(tensors: dict[str, Tensor], config: dict) -> "onnx.ModelProto":  # noqa: F821
    g = _Graph()
    H, NH = config["hidden"], config["heads"]
    hd = H // NH
    eps = float(config["eps"])
    ids, mask = "input_ids", "attention_mask"

    word = tensors["word"]
    if isinstance(word, Stored):  # gather the integers, widen only the rows read
        word_out = g.widen("word", word, source=g.op("Gather", ["word_quantized", ids], name="word_gather"))
    else:
        word_out = g.op("Gather", [g.const("word", word), ids], name="word_gather")
    seq = g.op("Shape", [ids], start=1, end=2)  # [tokens], 1-D
    pos = g.op("Slice", [g.const("pos", tensors["pos"]), g.const("zero_1d", np.asarray([0], np.int64)), seq,
                         g.const("axes0b", np.asarray([0], np.int64))])
    x = g.op("Add", [g.op("Add", [word_out, pos]), g.const("type", tensors["type"])])
    x = g.op("LayerNormalization", [x, g.const("ln_w", tensors["ln_w"]), g.const("ln_b", tensors["ln_b"])],
             axis=-1, epsilon=eps)
    # additive attention bias [B, 1, 1, T]: 0 for real tokens, -1e4 for padding (no -inf: no NaN rows)
    m = g.op("Cast", [mask], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const("one_f", np.asarray(1.0, np.float32)), m]),
                        g.const("neg", np.asarray(-1e4, np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("axes12", np.asarray([1, 2], np.int64))])
    heads_shape = g.const("heads_shape", np.asarray([0, 0, NH, hd], np.int64))
    merge_shape = g.const("merge_shape", np.asarray([0, 0, H], np.int64))
    scale = g.const("scale", np.asarray(1.0 / math.sqrt(hd), np.float32))
    half, sqrt2 = g.const("half", np.asarray(0.5, np.float32)), g.const("sqrt2", np.asarray(math.sqrt(2.0), np.float32))

    def linear(inp: str, prefix: str) -> str:
        w = g.tensor(f"{prefix}.w", tensors[f"{prefix}.w"])
        return g.op("Add", [g.op("MatMul", [inp, w], name=f"{prefix}_matmul"), g.const(f"{prefix}.b", tensors[f"{prefix}.b"])])

    def layer_norm(inp: str, prefix: str) -> str:
        return g.op("LayerNormalization", [inp, g.const(f"{prefix}.w", tensors[f"{prefix}.w"]),
                                           g.const(f"{prefix}.b", tensors[f"{prefix}.b"])], axis=-1, epsilon=eps)

    for i in range(config["layers"]):
        p = f"layers.{i}"
        q = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.q"), heads_shape])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.k"), heads_shape])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.v"), heads_shape])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k], name=f"attn_qk_{i}"), scale]), bias])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v], name=f"attn_pv_{i}")
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
        x = layer_norm(g.op("Add", [x, linear(ctx, f"{p}.ao")]), f"{p}.aln")
        h = linear(x, f"{p}.fi")
        h = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [g.const(f"one_{i}", np.asarray(1.0, np.float32)),
                                                                g.op("Erf", [g.op("Div", [h, sqrt2])])])])
        x = layer_norm(g.op("Add", [x, linear(h, f"{p}.fo")]), f"{p}.oln")
    logit = g.op("Squeeze", [linear(x, "head"), g.const("axes_last", np.asarray([-1], np.int64))])
    g.op("Sigmoid", [logit], name="p_unsupported")
    graph = helper.make_graph(
        g.nodes, "groundtrace_crossencoder",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("p_unsupported", TensorProto.FLOAT, ["batch", "tokens"])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="groundtrace")
    model.ir_version = 8
    return model


def export(state: dict[str, np.ndarray], config: dict, out: Path) -> None:
    """A torch state dict (fp32 numpy) as the shipped graph at ``out``."""
    save(build_graph(graph_tensors(state, config), config), str(out))
