"""A shipped ONNX cross-encoder reads back into torch (training/xe/from_onnx.py): export a small model, read it
back, and get its weights within int8 rounding and its token probabilities as onnxruntime computes them (float32
arithmetic on the stored weights: the same within float rounding, on any CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import export as xe_export, from_onnx, model as xe_model  # noqa: E402


def test_an_exported_model_reads_back_with_its_weights_and_its_outputs(tmp_path):
    torch.manual_seed(0)
    network = xe_model.CrossEncoder(vocab=300, hidden=32, layers=2, heads=4, ffn=64, max_positions=64)
    torch.nn.init.normal_(network.head.weight, std=0.5)
    state = {k: v.detach().numpy() for k, v in network.state_dict().items()}
    path = tmp_path / "tiny.onnx"
    xe_export.export(state, network.config, path)

    read, config = from_onnx.read_state(path)
    assert config.pop("eps") == pytest.approx(1e-12, rel=1e-6)  # as the graph holds it: float32
    assert config == {k: v for k, v in network.config.items() if k != "eps"}
    assert sorted(read) == sorted(state)
    for name, value in state.items():
        if name == "word.weight":  # uint8 per tensor: half a step of (max - min) / 255
            step = (value.max() - value.min()) / 255
        elif value.ndim == 2 and name != "pos.weight":  # int8 per output channel (a column of [in, out])
            step = np.abs(value).max(axis=-1, keepdims=True) / 127
        else:  # kept fp32
            step = 0
        assert np.all(np.abs(read[name] - value) <= step / 2 + 1e-6), name

    back = from_onnx.load_model(path).eval()
    ids = np.random.default_rng(0).integers(3, 300, (2, 40)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 30:] = 0
    onnx_p = ort.InferenceSession(str(path)).run(None, {"input_ids": ids, "attention_mask": mask})[0]
    with torch.no_grad():
        torch_p = torch.sigmoid(back(torch.from_numpy(ids), torch.from_numpy(mask).bool())).numpy()
    assert np.abs(onnx_p - torch_p)[mask == 1].max() < 1e-5
