"""A shipped ONNX cross-encoder read back: its stored tensors (export.py's names, integers and scales as
they are) and a torch state dict, so a new model can start from the shipped one's weights and the float
reference (reference.py) can compute what the graph should.

Both graphs grounding-2 has had read the same: today's (int8 weights widened by Cast and Mul, float32
arithmetic) and its first (onnxruntime's dynamic quantization), whose initializers have the same names:
``NAME_quantized``, ``NAME_scale`` (and ``NAME_zero_point`` where not all zero) for a stored tensor, ``NAME`` for a float one.
Weight matrices are [in, out] in the graph, transposed here to torch's [out, in].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import load, numpy_helper, save

from xe.export import LINEARS, Stored, Tensor, build_graph

_NORMS = ("aln", "oln")


def _tensor(t: dict[str, np.ndarray], name: str) -> Tensor:
    if name in t:
        return t[name].astype(np.float32)
    q, scale = t[f"{name}_quantized"], t[f"{name}_scale"].astype(np.float32)
    return Stored(q, scale, t.get(f"{name}_zero_point", np.zeros(scale.shape, q.dtype)))


def read_tensors(path: Path) -> tuple[dict[str, Tensor], dict]:
    """(the graph's named tensors, its config) from a shipped ONNX file."""
    model = load(str(path))
    t = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    names = ["word", "pos", "type", "ln_w", "ln_b", "head.w", "head.b"]
    layers = 1 + max(int(name.split(".")[1]) for name in t if name.startswith("layers."))
    for i in range(layers):
        names += [f"layers.{i}.{n}.{part}" for n in LINEARS for part in ("w", "b")]
        names += [f"layers.{i}.{n}.{part}" for n in _NORMS for part in ("w", "b")]
    tensors = {name: _tensor(t, name) for name in names}
    norm = next(n for n in model.graph.node if n.op_type == "LayerNormalization")
    eps = next(a.f for a in norm.attribute if a.name == "epsilon")
    hidden = tensors["pos"].shape[1]
    first = tensors["layers.0.fi.w"]
    config = {"vocab": (tensors["word"].q if isinstance(tensors["word"], Stored) else tensors["word"]).shape[0],
              "hidden": hidden, "layers": layers, "heads": int(t["heads_shape"][2]),
              "ffn": (first.q if isinstance(first, Stored) else first).shape[1],
              "max_positions": tensors["pos"].shape[0], "eps": float(eps)}
    return tensors, config


def widened(value: Tensor) -> np.ndarray:
    return value.widen() if isinstance(value, Stored) else value


def read_state(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """(state dict of model.CrossEncoder as numpy fp32, its config) from a shipped ONNX file."""
    t, config = read_tensors(path)
    state: dict[str, np.ndarray] = {
        "word.weight": widened(t["word"]), "pos.weight": t["pos"], "type_emb": t["type"],
        "ln.weight": t["ln_w"], "ln.bias": t["ln_b"],
        "head.weight": widened(t["head.w"]).T.copy(), "head.bias": t["head.b"],
    }
    for i in range(config["layers"]):
        for name in LINEARS:
            state[f"layers.{i}.{name}.weight"] = widened(t[f"layers.{i}.{name}.w"]).T.copy()
            state[f"layers.{i}.{name}.bias"] = t[f"layers.{i}.{name}.b"]
        for name in _NORMS:
            state[f"layers.{i}.{name}.weight"] = t[f"layers.{i}.{name}.w"]
            state[f"layers.{i}.{name}.bias"] = t[f"layers.{i}.{name}.b"]
    return state, config


def load_model(path: Path):
    """model.CrossEncoder with the weights of the shipped ONNX file at ``path``."""
    import torch

    from xe import model as xe_model

    state, config = read_state(path)
    network = xe_model.CrossEncoder(config["vocab"], config["hidden"], config["layers"], config["heads"],
                                    config["ffn"], config["max_positions"], config["eps"])
    network.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return network


def repack(shipped: Path, out: Path) -> None:
    """A shipped graph's stored weights, integers and scales as they are, written as today's graph: how
    grounding-2's first (dynamic int8) file became the float-arithmetic one, weights unchanged."""
    tensors, config = read_tensors(shipped)
    save(build_graph(tensors, config), str(out))
