"""`make dist`: the wheels a team publishes to its own index (groundtrace is not on PyPI). The core's wheel is built
here as the Makefile builds it (without build isolation: no network in tests) from a copy of what it is built
from, and must carry the detector's model and py.typed: a wheel without them installs and then fails to score."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_dist_builds_a_wheel_for_the_core_and_each_integration() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    dists = re.search(r"^DISTS := (.+)$", makefile, re.MULTILINE)
    assert dists is not None and dists.group(1).split() == [
        ".", "integrations/langchain", "integrations/llamaindex", "integrations/demo"]
    recipe = makefile.split("\ndist:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/pip wheel -q --no-deps -w dist $(DISTS)" in recipe
    names = {path.parent.name: re.search(r'^name = "(.+)"$', path.read_text(encoding="utf-8"), re.MULTILINE).group(1)
             for path in (ROOT / "integrations").glob("*/pyproject.toml")}
    assert names == {"langchain": "groundtrace-langchain", "llamaindex": "groundtrace-llamaindex",
                     "demo": "groundtrace-demo"}


def test_the_core_wheel_carries_the_detector_model_and_py_typed(tmp_path: Path) -> None:
    project = tmp_path / "groundtrace"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "dist"), str(project)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("*.whl")
    assert wheel.name == "groundtrace-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
    model = ROOT / "src" / "groundtrace" / "detector" / "grounding-xe.onnx"
    assert sizes["groundtrace/detector/grounding-xe.onnx"] == model.stat().st_size
    for name in ("groundtrace/py.typed", "groundtrace/detector/grounding-xe.spm", "groundtrace/detector/grounding.json",
                 "groundtrace/examples/answers.jsonl", "groundtrace/backends/default-verdict.json"):
        assert name in sizes, name
    assert any(name.startswith("groundtrace/report/") and name.endswith(".j2") for name in sizes)
    entry_points = [name for name in sizes if name.endswith(".dist-info/entry_points.txt")]
    assert entry_points, sorted(sizes)[:20]
