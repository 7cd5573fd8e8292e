"""Write a trained cross-encoder as the shipped files: an int8 ONNX graph and the tokenizer.

The graph is built op by op with onnx.helper (no torch exporter involved), from the state dict:
embeddings + LayerNorm, post-LN BERT layers with exact (erf) GELU, a sigmoid token head. Then
onnxruntime's dynamic quantization makes the weight MatMuls and the word-embedding Gather int8
(per output channel); the attention products stay fp32.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

OPSET = 17


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


def build_graph(state: dict[str, np.ndarray], config: dict) -> "onnx.ModelProto":  # noqa: F821
    g = _Graph()
    H, NH = config["hidden"], config["heads"]
    hd = H // NH
    eps = float(config["eps"])
    f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731
    ids, mask = "input_ids", "attention_mask"

    word = g.op("Gather", [g.const("word", f32(state["word.weight"])), ids], name="word_gather")
    seq = g.op("Shape", [ids], start=1, end=2)  # [tokens], 1-D
    pos = g.op("Slice", [g.const("pos", f32(state["pos.weight"])), g.const("zero_1d", np.asarray([0], np.int64)), seq,
                         g.const("axes0b", np.asarray([0], np.int64))])
    x = g.op("Add", [g.op("Add", [word, pos]), g.const("type", f32(state["type_emb"]))])
    x = g.op("LayerNormalization", [x, g.const("ln_w", f32(state["ln.weight"])), g.const("ln_b", f32(state["ln.bias"]))],
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
        w = g.const(f"{prefix}.w", f32(state[f"{prefix}.weight"]).T)
        return g.op("Add", [g.op("MatMul", [inp, w], name=f"{prefix}_matmul"), g.const(f"{prefix}.b", f32(state[f"{prefix}.bias"]))])

    def layer_norm(inp: str, prefix: str) -> str:
        return g.op("LayerNormalization", [inp, g.const(f"{prefix}.w", f32(state[f"{prefix}.weight"])),
                                           g.const(f"{prefix}.b", f32(state[f"{prefix}.bias"]))], axis=-1, epsilon=eps)

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
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        save(build_graph(state, config), str(fp32))
        # The attention products, and the FFN output projection whose post-GELU input has outliers
        # that per-tensor int8 activations cannot hold (measured: most of the int8 error), stay fp32.
        attention = [f"attn_{kind}_{i}" for i in range(config["layers"]) for kind in ("qk", "pv")]
        attention += [f"layers.{i}.fo_matmul" for i in range(config["layers"])]
        quantize_dynamic(str(fp32), str(Path(tmp) / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul", "Gather"], nodes_to_exclude=attention,
                         extra_options={"WeightSymmetric": True})
        shutil.copyfile(Path(tmp) / "int8.onnx", out)
