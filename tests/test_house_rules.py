"""House rules that are not about imports (those are tests/test_import_rules.py): modules stay small enough
to read, and the suite's own command lints first, so CI (which runs `make test`) cannot skip ruff or mypy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "src" / "groundtrace", *sorted((ROOT / "integrations").glob("*/src/*"))]
MAX_LINES = 500


def test_no_module_of_the_core_or_an_integration_is_over_500_lines() -> None:
    modules = [path for source in SOURCES for path in source.rglob("*.py")]
    assert len(modules) > 100  # the walk found the packages
    long = {str(path.relative_to(ROOT)): n for path in modules
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these along their seams: {long}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_ruff_and_mypy_before_the_suite() -> None:
    planned = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    steps = [next((i for i, line in enumerate(planned.splitlines()) if word in line), -1)
             for word in ("ruff check", "mypy", "pytest")]
    assert -1 not in steps and steps == sorted(steps), planned
