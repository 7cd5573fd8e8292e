"""The shipped detector computes the same numbers on every CPU: float32 arithmetic on int8-stored weights,
held to a float64 reference of the same weights within the model card's tolerance (training/xe/reference.py,
groundtrace/detector/numerics.py). The first graph of grounding-2 (onnxruntime's dynamic quantization) gave
token probabilities up to 0.17 from the float model, and 0.12 apart between an AVX2 and an AVX-512 VNNI CPU."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.detector import numerics
from groundtrace.detector.crossencoder import ONNX_FILE, CrossEncoder
from groundtrace.metrics.grounding import GroundingMetric, model_card
from tests.conftest import shared_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))

from xe import export, from_onnx, reference  # noqa: E402

TOLERANCE = GroundingMetric.numerics()[0]
# ops whose results depend on integer kernels (u8s8 saturation without VNNI, activation quantization)
INTEGER_OPS = {"MatMulInteger", "DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear", "MatMulNBits",
               "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QLinearMatMul", "QAttention", "ConvInteger",
               "GatherBlockQuantized"}


def test_the_card_states_a_tolerance_and_where_it_was_measured():
    tolerance, measured_on = GroundingMetric.numerics()
    assert tolerance == model_card()["numerics"]["tolerance"] == 1e-5
    assert any("AVX-512" in m for m in measured_on) and any("AVX2" in m and "AVX-512" not in m for m in measured_on)
    assert any(m.startswith("aarch64") for m in measured_on), measured_on


def test_the_shipped_graph_has_no_integer_arithmetic_before_or_after_onnxruntime_optimizes_it(tmp_path):
    ops = {n.op_type for n in onnx.load(str(ONNX_FILE), load_external_data=False).graph.node}
    assert not ops & INTEGER_OPS, ops & INTEGER_OPS
    # what onnxruntime runs: its optimizations at the level the metric's sessions use (the default, all) turn
    # the Cast -> Mul of each stored weight into a float32 constant, and introduce no integer kernel
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(ONNX_FILE), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    ran = {n.op_type for n in optimized.graph.node}
    assert not ran & INTEGER_OPS and "Cast" not in {n.op_type for n in optimized.graph.node if n.input[0].endswith("_quantized")}
    assert sum(n.op_type in {"MatMul", "FusedMatMul"} for n in optimized.graph.node) >= 6 * 8


def test_the_shipped_graph_agrees_with_the_float64_reference_on_its_check_windows():
    result = numerics.check(TOLERANCE)
    assert result.windows == 12 and result.positions > 3000
    assert result.ok and result.max_difference <= TOLERANCE, result
    assert 0 < result.max_difference  # float32 against float64: never bit-equal, so the comparison is real


def test_the_stored_reference_is_the_float64_model_of_the_shipped_weights():
    model = reference.Reference(ONNX_FILE)
    for ids, stored in numerics.check_windows():
        computed = model.probabilities(ids[None], np.ones((1, len(ids)), np.int64))[0]
        assert np.abs(computed - stored).max() < 1e-9


def test_a_graph_with_integer_activations_fails_the_check(tmp_path):
    """The check catches what it is for: the same weights with onnxruntime's dynamic quantization
    (grounding-2's first graph) are 0.03-0.2 from the reference on the check windows, far beyond the tolerance."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    state, config = from_onnx.read_state(ONNX_FILE)
    fp32 = tmp_path / "fp32.onnx"
    onnx.save(export.build_graph({**export.graph_tensors(state, config), **_float_tensors(state, config)}, config), str(fp32))
    quantize_dynamic(str(fp32), str(tmp_path / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"], extra_options={"WeightSymmetric": True})
    result = numerics.check(TOLERANCE, CrossEncoder(tmp_path / "int8.onnx"), max_tokens=46)
    assert not result.ok and result.max_difference > 100 * TOLERANCE, result


def _float_tensors(state, config) -> dict:
    """Every weight matrix as float32 (a float graph, before any quantization)."""
    out = {"word": state["word.weight"], "head.w": state["head.weight"].T.copy()}
    for i in range(config["layers"]):
        for name in export.LINEARS:
            out[f"layers.{i}.{name}.w"] = state[f"layers.{i}.{name}.weight"].T.copy()
    return out


def test_values_and_verdicts_on_dev_records_equal_the_float64_models():
    """The metric end to end (claims, windows, evidence, spans) on RAGTruth answers: what the shipped graph
    gives and what the model in float64 gives, within the tolerance, and the same verdicts and spans."""
    rows = [json.loads(line) for line in open(shared_data("ragtruth_qa_dev.jsonl"), encoding="utf-8")][:8]
    shipped, exact = GroundingMetric(model=CrossEncoder()), GroundingMetric(model=reference.ReferenceEncoder())
    flagged = 0
    for row in rows:
        a, b = shipped.score(row), exact.score(row)
        assert abs(a.value - b.value) <= TOLERANCE, row["id"]
        assert a.hallucinated == b.hallucinated and [(s.start, s.end) for s in a.spans] == [(s.start, s.end) for s in b.spans]
        flagged += a.hallucinated
    assert 0 < flagged < len(rows)  # both verdicts occur among them


def test_repacking_the_shipped_graph_reproduces_it_byte_for_byte(tmp_path):
    """The CPU path that writes the shipped file from its stored weights (training/xe/build.py repack) is the
    one that made it: the same integers, scales and graph, the same bytes."""
    from_onnx.repack(ONNX_FILE, tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == ONNX_FILE.read_bytes()


def test_metrics_check_says_the_difference_and_fails_beyond_the_tolerance(monkeypatch):
    done = CliRunner().invoke(app, ["metrics", "--check"])
    assert done.exit_code == 0, done.output
    line = " ".join(done.output.split())
    assert line.startswith(f"grounding on {numerics.instruction_set()}: 12 check windows, 3759 positions, largest "
                           "difference from the float64 reference "), line
    assert line.endswith("within the tolerance 1e-05"), line
    monkeypatch.setattr(GroundingMetric, "numerics", classmethod(lambda cls: (1e-12, [])))
    done = CliRunner().invoke(app, ["metrics", "--check"])
    assert done.exit_code == 1 and "BEYOND the tolerance 1e-12" in " ".join(done.output.split()), done.output


QEMU = shutil.which("qemu-x86_64")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 kernels are emulated on an x86_64 machine only")
@pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 (Debian's qemu-user) is not installed; `make test` installs it "
                                         "where apt can run")
def test_avx2_kernels_give_the_same_numbers():
    """onnxruntime picks its kernels from CPUID: under QEMU's Haswell (AVX2 + FMA, no AVX-512, no VNNI) it runs
    the AVX2 ones, whatever this machine has. Emulated float kernels are slow (about a second per token), so
    the shortest check window is read."""
    program = ("import json; from groundtrace.detector.numerics import check; "
               f"r = check({TOLERANCE!r}, max_tokens=16); "
               "print(json.dumps([r.instruction_set, r.windows, r.max_difference]))")
    done = subprocess.run([QEMU, "-cpu", "Haswell-v4", sys.executable, "-c", program], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    cpu, windows, difference = json.loads(done.stdout.strip().splitlines()[-1])
    assert cpu == "x86_64 AVX2" and windows == 1
    assert difference <= TOLERANCE, difference
