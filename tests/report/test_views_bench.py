"""The views' figures are `groundtrace bench`'s: the labelled file of conftest.py (English and
Chinese answers, three conversations) is scored by lexical once for the views and benched by the
command at the same thresholds; the figures overall and per language and session must be equal."""

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.report.views import breakdown, confusion_at

runner = CliRunner()
BENCH_KEYS = ("n", "errors", "positives", "precision", "recall", "f1", "balanced_accuracy", "auc")


def bench(path, threshold):
    args = ["bench", str(path), "-m", "lexical", "--json", "--by", "session"]
    result = runner.invoke(app, args + (["--threshold", repr(threshold)] if threshold is not None else []))
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])["lexical"]


def as_bench(figures):
    """The views' names for bench's figures."""
    return {"n": figures["labelled"], "errors": figures["errors"], "positives": figures["positives"],
            **{key: figures[key] for key in BENCH_KEYS[3:]}}


@pytest.mark.parametrize("pick", ["default", 0.3, "a record's value", 0.55])
def test_overall_and_per_group_figures_equal_bench_at_the_threshold(bench_file, pick):
    path, rows, labels = bench_file.path, bench_file.rows, bench_file.labels
    values = sorted(row.score("lexical").value for row in rows)
    # a threshold equal to a record's value: a tie, not flagged since lexical is higher-is-better
    threshold = {"default": None, "a record's value": values[len(values) // 2]}.get(pick, pick)
    got = bench(path, threshold)
    mine = confusion_at(rows, "lexical", threshold, labels)
    assert mine["threshold"] == got["threshold"]
    assert as_bench(mine) == {key: got[key] for key in BENCH_KEYS}
    for key, bench_key in (("language", "language"), ("session", "session_id")):
        groups = {f"{bench_key}:{g['value']}": as_bench(g["metrics"]["lexical"])
                  for g in breakdown(rows, key, labels, {"lexical": got["threshold"]})}
        assert groups == {name: {k: stats[k] for k in BENCH_KEYS} for name, stats in got["groups"].items()
                          if name.startswith(f"{bench_key}:")}
