"""-m/--metrics: repeated or comma-separated alike, on every command that takes it (issue 29: -m a -m b kept b)."""

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app

runner = CliRunner()
ROWS = [{"id": "a", "contexts": ["Students borrow books."], "answer": "Students borrow books.", "label": 0},
        {"id": "b", "contexts": ["Students borrow books."], "answer": "Teachers sell magazines.", "label": 1}]


@pytest.fixture
def labelled(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return path


def test_metric_names_splits_commas_keeps_order_and_drops_duplicates():
    from groundtrace.cli.common import metric_names

    assert metric_names(["facts", "lexical, facts", " ", "grounding,"]) == ["facts", "lexical", "grounding"]
    assert metric_names(None) == []


@pytest.mark.parametrize("flags", [["-m", "lexical", "-m", "facts"], ["-m", "lexical,facts"],
                                   ["--metrics", "lexical", "-m", "facts,lexical"]])
def test_score_runs_every_metric_named(labelled, tmp_path, flags):
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["score", str(labelled), *flags, "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [[s["metric"] for s in row["scores"]] for row in rows] == [["lexical", "facts"]] * 2


@pytest.mark.parametrize("flags", [["-m", "lexical", "-m", "facts"], ["-m", "lexical,facts"],
                                   ["-m", "lexical", "-m", "lexical", "-m", "facts"]])
def test_bench_runs_every_metric_named(labelled, flags):
    result = runner.invoke(app, ["bench", str(labelled), *flags, "--json"])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)) == ["lexical", "facts"]


def test_bench_without_m_benches_grounding(labelled):
    result = runner.invoke(app, ["bench", str(labelled), "--json"])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)) == ["grounding"]
