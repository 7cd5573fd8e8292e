"""`groundtrace score`: `-o -` writes the scored records to stdout (everything else to stderr), and a metric that
failed on every record (a judge that is down) exits 3 with the most common reason, not 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from tests.loopback import LoopbackServer, Request
from tests.test_backfill import A, C, D, spans_for_backfill, write_otlp

runner = CliRunner()
ROWS = [{"id": name, "question": "What is the fee?", "contexts": ["The fee is 5 euros."],
         "answer": f"The fee is {fee} euros."} for name, fee in (("a", 5), ("b", 6), ("c", 7))]


@pytest.fixture
def answers(tmp_path: Path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_dash_writes_clean_jsonl_to_stdout_and_the_tables_to_stderr(answers: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical", "-o", "-", "--show", "3"])
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in jsonl(result.stdout)] == ["a", "b", "c"]
    assert all(row["scores"][0]["metric"] == "lexical" for row in jsonl(result.stdout))
    assert "Scores" in result.stderr and "Per record" in result.stderr
    assert "wrote 3 scored records to stdout" in result.stderr
    assert not (tmp_path / "-").exists()


def test_dash_from_a_real_process_is_a_pipe_another_program_can_read(answers: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", "-", "-m", "lexical", "-o", "-"],
                          input=answers.read_text(encoding="utf-8"), capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["id"] for row in jsonl(done.stdout)] == ["a", "b", "c"]
    assert "Scores" in done.stderr and "Scores" not in done.stdout
    assert not (tmp_path / "-").exists()


def test_dash_with_from_streams_each_scored_request(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spans = write_otlp(tmp_path / "spans.jsonl", spans_for_backfill())
    result = runner.invoke(app, ["score", "--from", f"otel-json:{spans}", "-m", "lexical", "-o", "-", "--rescore",
                                 "--sinks", "none"])
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in jsonl(result.stdout)] == [A, C, D]
    assert "Scores" in result.stderr
    assert not (tmp_path / "-").exists()


def judge(request: Request) -> tuple[int, dict]:
    """A judge that refuses every call: two of the three answers with 401, the 7-euro one with 403."""
    if b"7 euros" in request.body:
        return 403, {"error": {"message": "forbidden"}}
    return 401, {"error": {"message": "bad key"}}


@pytest.fixture
def refusing_judge(monkeypatch, tmp_path: Path):
    with LoopbackServer(judge) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
        monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
        yield server


JUDGE_ONCE = ["-O", "faithfulness.max_retries=0", "-O", "faithfulness.cache=false"]


def test_a_metric_that_failed_on_every_record_exits_3_naming_the_most_common_error(answers, refusing_judge, tmp_path):
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical,faithfulness", *JUDGE_ONCE, "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert len(refusing_judge.requests) == 3
    [line] = [line for line in result.stderr.splitlines() if line.startswith("faithfulness:")]
    assert line.startswith("faithfulness: 3 of 3 records failed, nothing measured (exit 3); the most common error "
                           "(2 records): judge error (http): the judge at "), line
    assert "answered HTTP 401" in line and "403" not in line
    assert "lexical:" not in result.stderr  # lexical scored every record
    rows = jsonl(out.read_text(encoding="utf-8"))  # what was scored is still written
    assert [[s["metric"] for s in row["scores"]] for row in rows] == [["lexical", "faithfulness"]] * 3
    assert all(row["scores"][0]["value"] is not None and row["scores"][1]["error"] for row in rows)


def test_exit_3_comes_before_a_gate_the_failed_metric_also_fails(answers, refusing_judge):
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical,faithfulness", *JUDGE_ONCE,
                                 "--max-flagged", "faithfulness=50%", "--max-flagged", "lexical=100%"])
    assert result.exit_code == 3, result.output
    assert "faithfulness: 3 of 3 records failed" in result.stderr
    lines = result.stderr.splitlines()  # each gate's own line is still printed
    assert "gate failed: faithfulness flagged 3 of 3 records (100.0%: 0 flagged, 3 could not be scored), more than " \
           "the allowed 50.0%" in lines
    assert any(line.startswith("gate passed: lexical flagged ") for line in lines), lines


def test_some_records_failing_is_not_a_failed_run(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps({**row, "answer": "" if row["id"] == "a" else row["answer"]}) + "\n"
                            for row in ROWS), encoding="utf-8")
    result = runner.invoke(app, ["score", str(path), "-m", "lexical"])
    assert result.exit_code == 0, result.output
    assert "lexical: 1 of 3 records failed, e.g. " in result.stderr


def test_every_record_failing_without_a_judge_too(tmp_path: Path) -> None:
    path = tmp_path / "empty-answers.jsonl"
    path.write_text("".join(json.dumps({**row, "answer": " "}) + "\n" for row in ROWS), encoding="utf-8")
    result = runner.invoke(app, ["score", str(path), "-m", "lexical"])
    assert result.exit_code == 3, result.output
    assert "lexical: 3 of 3 records failed, nothing measured (exit 3); the most common error (3 records): " \
           "the answer is empty" in " ".join(result.stderr.split())
