"""A shipped int8 ONNX cross-encoder (export.py's graph after onnxruntime's dynamic quantization) read
back into a torch state dict, so a new model can start from the shipped one's weights.

Weights come back dequantized: ``(q - zero_point) * scale``, per output channel for the MatMuls
(stored [in, out], transposed here to torch's [out, in]) and per tensor for the word embedding.
The fp32 tensors export.py left unquantized (biases, norms, positions, the FFN output projection)
come back as they are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import load, numpy_helper

_LINEARS = ("q", "k", "v", "ao", "fi", "fo")
_NORMS = ("aln", "oln")


def _tensors(path: Path) -> dict[str, np.ndarray]:
    model = load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _weight(t: dict[str, np.ndarray], name: str) -> np.ndarray:
    """The [in, out] weight ``name`` as fp32, dequantized where the graph holds it int8."""
    if name in t:
        return t[name].astype(np.float32)
    q, scale, zero = t[f"{name}_quantized"], t[f"{name}_scale"], t[f"{name}_zero_point"]
    return ((q.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)).astype(np.float32)


def read_state(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """(state dict of model.CrossEncoder as numpy fp32, its config) from a shipped ONNX file."""
    t = _tensors(path)
    layers = 1 + max(int(name.split(".")[1]) for name in t if name.startswith("layers."))
    state: dict[str, np.ndarray] = {
        "word.weight": _weight(t, "word"),
        "pos.weight": t["pos"].astype(np.float32),
        "type_emb": t["type"].astype(np.float32),
        "ln.weight": t["ln_w"].astype(np.float32),
        "ln.bias": t["ln_b"].astype(np.float32),
        "head.weight": _weight(t, "head.w").T.copy(),
        "head.bias": t["head.b"].astype(np.float32),
    }
    for i in range(layers):
        for name in _LINEARS:
            state[f"layers.{i}.{name}.weight"] = _weight(t, f"layers.{i}.{name}.w").T.copy()
            state[f"layers.{i}.{name}.bias"] = t[f"layers.{i}.{name}.b"].astype(np.float32)
        for name in _NORMS:
            state[f"layers.{i}.{name}.weight"] = t[f"layers.{i}.{name}.w"].astype(np.float32)
            state[f"layers.{i}.{name}.bias"] = t[f"layers.{i}.{name}.b"].astype(np.float32)
    hidden = state["pos.weight"].shape[1]
    heads_shape = t["heads_shape"]
    config = {"vocab": state["word.weight"].shape[0], "hidden": hidden, "layers": layers,
              "heads": int(heads_shape[2]), "ffn": state["layers.0.fi.weight"].shape[0],
              "max_positions": state["pos.weight"].shape[0], "eps": 1e-12}
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
