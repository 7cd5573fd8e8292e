"""A command whose extra is not installed says so before any work: `fit` before it reads and scores the labels
(it used to score every record and then fail importing scikit-learn), `--engine ray` before a record is read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from groundtrace.errors import install_hint
from typer.testing import CliRunner

from groundtrace.cli import app

runner = CliRunner()
ROWS = [{"id": str(n), "contexts": ["The fee is 5 euros."], "answer": f"The fee is {n} euros.", "label": int(n != 5)}
        for n in (5, 6)]


@pytest.fixture
def labelled(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("GROUNDTRACE_PROGRESS", "1")  # the bar shows what was scored, even off a terminal
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def test_fit_without_its_extra_stops_before_scoring(labelled: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # as if the fit extra were not installed
    result = runner.invoke(app, ["fit", str(labelled), "-m", "lexical", "-o", str(tmp_path / "v.json")])
    assert result.exit_code == 2, result.output
    said = " ".join(result.stderr.split())
    assert said.startswith("error: groundtrace fit needs optional dependencies that are not installed (sklearn): "
                           + install_hint("fit")), said
    assert "2/2" not in said  # no progress bar: nothing was scored
    assert not (tmp_path / "v.json").exists()


def test_with_the_extra_the_same_fit_scores_first(labelled: Path, tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    # two records are too few to fit: it fails, but only after scoring them (the bar is the witness)
    result = runner.invoke(app, ["fit", str(labelled), "-m", "lexical", "-o", str(tmp_path / "v.json")])
    assert "2/2" in result.stderr and "optional dependencies" not in result.stderr


def test_engine_ray_without_its_extra_stops_before_reading(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    missing = tmp_path / "not-there.jsonl"  # never opened: the extra is checked first
    result = runner.invoke(app, ["score", str(missing), "-m", "lexical", "--engine", "ray"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.stderr.split())
    assert said.startswith("error: --engine ray needs optional dependencies that are not installed (ray): "
                           + install_hint("ray")), said
