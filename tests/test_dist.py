"""`make dist`: the wheels a team publishes to its own index (groundtrace is not on PyPI). The core's wheel is built
here as the Makefile builds it (without build isolation: no network in tests) from a copy of what it is built
from, and must carry the detector's model and py.typed: a wheel without them installs and then fails to score.
Each wheel's METADATA carries the license as PEP 639 has it (License-Expression, License-File) and classifiers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

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


def build_wheel(project: Path, into: Path) -> Path:
    """The wheel pip builds of ``project`` (as `make dist` does, without build isolation: no network in tests)."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(into), str(project)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = into.glob(f"{project.name.replace('-', '_')}-*.whl")
    return wheel


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The core's wheel, built from a copy of what it is built from."""
    tmp_path = tmp_path_factory.mktemp("core")
    project = tmp_path / "groundtrace"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return build_wheel(project, tmp_path / "dist")


def metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode("utf-8"))


def test_the_core_wheel_carries_the_detector_model_and_py_typed(core_wheel: Path) -> None:
    wheel = core_wheel
    assert wheel.name == "groundtrace-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
    model = ROOT / "src" / "groundtrace" / "detector" / "grounding-xe.onnx"
    assert sizes["groundtrace/detector/grounding-xe.onnx"] == model.stat().st_size
    for name in ("groundtrace/py.typed", "groundtrace/detector/grounding-xe.spm", "groundtrace/detector/grounding.json",
                 "groundtrace/detector/grounding-xe-check.npz",
                 "groundtrace/examples/answers.jsonl", "groundtrace/backends/default-verdict.json"):
        assert name in sizes, name
    assert any(name.startswith("groundtrace/report/") and name.endswith(".j2") for name in sizes)
    entry_points = [name for name in sizes if name.endswith(".dist-info/entry_points.txt")]
    assert entry_points, sorted(sizes)[:20]


def check_metadata(wheel: Path, name: str) -> Message:
    """PEP 639's license fields (no deprecated License header or License classifier), the classifiers a package
    index filters on, and the license text itself in the wheel."""
    found = metadata(wheel)
    assert found["Name"] == name and found["Version"] == "0.1.0"
    assert float(found["Metadata-Version"]) >= 2.4  # the version that has License-Expression
    assert found["License-Expression"] == "Apache-2.0"
    assert found.get_all("License-File") == ["LICENSE"]
    assert found["License"] is None
    classifiers = found.get_all("Classifier") or []
    assert {"Typing :: Typed", "Programming Language :: Python :: 3 :: Only", "Programming Language :: Python :: 3.11",
            "Development Status :: 3 - Alpha"} <= set(classifiers), classifiers
    assert not [c for c in classifiers if c.startswith("License ::")], classifiers
    assert found["Requires-Python"] == ">=3.11"
    with zipfile.ZipFile(wheel) as archive:
        license_text = archive.read(f"{name.replace('-', '_')}-0.1.0.dist-info/licenses/LICENSE").decode("utf-8")
    assert license_text == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    return found


def test_the_core_wheel_metadata(core_wheel: Path) -> None:
    found = check_metadata(core_wheel, "groundtrace")
    assert "Natural Language :: Chinese (Simplified)" in found.get_all("Classifier")
    assert set(found.get_all("Provides-Extra")) >= {"openai", "otel", "otlp", "fit", "parquet", "ray"}


@pytest.mark.parametrize("integration", ["langchain", "llamaindex", "demo"])
def test_each_integration_wheel_metadata(integration: str, tmp_path: Path) -> None:
    project = tmp_path / f"groundtrace-{integration}"
    shutil.copytree(ROOT / "integrations" / integration, project,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "tests", "benchmarks", "build"))
    check_metadata(build_wheel(project, tmp_path / "dist"), f"groundtrace-{integration}")
