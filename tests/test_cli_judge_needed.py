"""A judge metric with no judge to call stops score and bench before the first record, with one line that says
what to set (issue 29: every record got the same error Score and the command exited 0)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app

runner = CliRunner()
ROWS = [{"id": "a", "question": "What is the fee?", "contexts": ["The fee is 5 euros."], "answer": "The fee is 6 euros.",
         "label": 1},
        {"id": "b", "question": "What is the fee?", "contexts": ["The fee is 5 euros."], "answer": "The fee is 5 euros.",
         "label": 0}]
LINE = ("error: faithfulness needs a judge: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible "
        "server, e.g. a local llama.cpp), or -O faithfulness.base_url=URL (base_url= in Python)")


@pytest.fixture
def no_judge(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GROUNDTRACE_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["score", "-o", "OUT"], ["bench"], ["bench", "--json"]])
def test_a_judge_metric_without_a_judge_stops_before_scoring(no_judge, tmp_path, command):
    out = tmp_path / "scores.jsonl"
    args = [command[0], str(no_judge), "-m", "lexical", "-m", "faithfulness",
            *[str(out) if a == "OUT" else a for a in command[1:]]]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert [line for line in result.output.splitlines() if line.strip()] == [LINE]
    assert not out.exists()


def test_a_key_for_openai_is_enough(no_judge, monkeypatch):
    from groundtrace.metrics import get_metric

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    get_metric("faithfulness").preflight()  # does not raise
    monkeypatch.delenv("OPENAI_API_KEY")
    get_metric("faithfulness", api_key="sk-test").preflight()
    with pytest.raises(RuntimeError, match="^faithfulness needs a judge: set OPENAI_API_KEY"):
        get_metric("faithfulness").preflight()


def test_a_local_server_needs_no_key_and_the_command_goes_on(no_judge, monkeypatch, tmp_path):
    pytest.importorskip("openai")
    # a loopback port nobody listens on: the judge is configured, so scoring starts and each record gets
    # the connection error as its Score (and the command exits 3: a judge that is down measured nothing)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(no_judge), "-m", "faithfulness", "-o", str(out),
                                 "-O", "faithfulness.max_retries=0"])
    assert result.exit_code == 3, result.output  # scored, and every record failed: exit 3, not 0
    assert "faithfulness: 2 of 2 records failed, nothing measured (exit 3)" in result.stderr
    scores = [json.loads(line)["scores"][0] for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(scores) == 2 and all("judge error (connection)" in s["error"] for s in scores)

    monkeypatch.delenv("OPENAI_BASE_URL")
    result = runner.invoke(app, ["bench", str(no_judge), "-m", "faithfulness", "--json",
                                 "-O", "faithfulness.base_url=http://127.0.0.1:9/v1", "-O", "faithfulness.max_retries=0"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["faithfulness"]["errors"] == 2
