"""`groundtrace synth-hallucinations -o -`: the labelled rows on stdout, the counts on stderr; a model that made
nothing of any record exits 3, as a metric that measured nothing does."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner

from groundtrace.cli import app
from tests.judge.scripted import ScriptedJudge
from tests.judge.test_judge_cli import ROWS, synth_reply, write_rows


def test_dash_writes_the_rows_to_stdout_and_the_counts_to_stderr(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    with ScriptedJudge({"HallucinatedAnswer": synth_reply}) as judge:
        source = write_rows(tmp_path / "in.jsonl", [ROWS[0]])
        result = CliRunner().invoke(app, ["synth-hallucinations", str(source), "-o", "-", "--base-url", judge.url,
                                          "--model", "gpt-4o-mini"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(row["id"], row["label"], row["answer"]) for row in rows] == [
        ("a:synth", 1, "The Eiffel Tower was completed in 1901.")]
    assert "wrote 1 hallucinated rows to stdout" in " ".join(result.stderr.split())
    assert not (tmp_path / "-").exists()


def test_a_model_that_changed_nothing_exits_3(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    with ScriptedJudge({"HallucinatedAnswer": synth_reply}) as judge:  # it changes nothing in ROWS[2]
        source = write_rows(tmp_path / "in.jsonl", [ROWS[2]])
        result = CliRunner().invoke(app, ["synth-hallucinations", str(source), "-o", str(tmp_path / "out.jsonl"),
                                          "--base-url", judge.url, "--model", "gpt-4o-mini"])
    assert result.exit_code == 3, result.output
    assert "wrote 0 hallucinated rows" in " ".join(result.stderr.split())
