"""The views' figures are `groundtrace bench`'s: one labelled file (English RAGTruth and Chinese
HalluQA answers, three conversations) is scored by lexical once for the views and benched by the
command at the same thresholds; the figures overall and per language and session must be equal."""

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.engine import Evaluator
from groundtrace.report.views import breakdown, confusion_at
from tests.conftest import shared_data

runner = CliRunner()
BENCH_KEYS = ("n", "errors", "positives", "precision", "recall", "f1", "balanced_accuracy", "auc")


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    lines = [json.loads(line) for name in ("ragtruth_qa_dev.jsonl", "halluqa_zh.jsonl")
             for line in shared_data(name).read_text(encoding="utf-8").splitlines()[:20]]
    for i, row in enumerate(lines):
        row["session_id"] = f"chat-{i % 3}"
    path = tmp_path_factory.mktemp("bench") / "labelled.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in lines), encoding="utf-8")
    rows = list(Evaluator("lexical").evaluate(lines))
    labels = {row["id"]: row["label"] for row in lines}
    assert {row["language"] for row in lines} == {"en", "zh"} and set(labels.values()) == {0, 1}
    return path, rows, labels


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
def test_overall_and_per_group_figures_equal_bench_at_the_threshold(labelled, pick):
    path, rows, labels = labelled
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
