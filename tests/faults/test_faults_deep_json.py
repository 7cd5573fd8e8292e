"""Issue 54, row 14: a JSONL line nested so deeply that json.loads raises RecursionError (not ValueError) is one
unreadable line, as a torn one is: `score` scores the rest and gives that line an error Score naming it; `bench`
and `fit` refuse the file naming the line (exit 2), as they refuse a torn line. A CSV cell so nested is text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.io import is_scores_file, read_jsonl, read_layout
from groundtrace.record import InvalidInput

runner = CliRunner()
DEEP = {"array": "[" * 100_000 + "]" * 100_000, "object": '{"a":' * 100_000 + "1" + "}" * 100_000}
ROWS = [{"id": f"r{i}", "question": "What is the fee?", "contexts": ["The fee is 5 euros."],
         "answer": f"The fee is {5 if i % 2 else 9} euros.", "label": 0 if i % 2 else 1} for i in range(6)]


def answers(tmp_path: Path, bad: str, at: int = 2) -> Path:
    """ROWS with ``bad`` as line ``at + 1``."""
    lines = [json.dumps(row) for row in ROWS]
    lines.insert(at, bad)
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_the_reader_makes_a_deep_line_one_invalid_input_and_reads_the_rest(tmp_path, kind):
    rows = list(read_jsonl(answers(tmp_path, DEEP[kind])))
    assert [row["id"] for row in rows if not isinstance(row, InvalidInput)] == [row["id"] for row in ROWS]
    [bad] = [row for row in rows if isinstance(row, InvalidInput)]
    assert bad.id == "line-3" and bad.message == "line 3 is JSON nested too deeply to read"
    first = answers(tmp_path, DEEP[kind], at=0)  # the line layouts and scores files are told by
    assert not is_scores_file(first) and len(list(read_layout(first).rows)) == len(ROWS) + 1


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_score_scores_the_rest_and_names_the_line(tmp_path, kind):
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(answers(tmp_path, DEEP[kind])), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "line 3 is JSON nested too deeply to read" in result.output and "recursion" not in result.output
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == len(ROWS) + 1
    assert sum(score["error"] is None for row in scored for score in row["scores"]) == len(ROWS)
    [failed] = [row for row in scored if row["scores"][0]["error"]]
    assert failed["id"] == "line-3" and "nested too deeply" in failed["scores"][0]["error"]


@pytest.mark.parametrize("command", ["bench", "fit"])
def test_bench_and_fit_refuse_it_naming_the_line_as_they_do_a_torn_line(tmp_path, command):
    for bad, why in ((DEEP["array"], "is JSON nested too deeply to read"), ('{"id": "x", "qu', "is not valid JSON")):
        result = runner.invoke(app, [command, str(answers(tmp_path, bad)), "-m", "lexical"])
        assert result.exit_code == 2, result.output
        assert f"answers.jsonl: line 3 {why}" in result.output and "recursion" not in result.output
        assert "Traceback" not in result.output


def test_a_deep_csv_cell_is_text_as_a_cell_that_is_not_json_is(tmp_path):
    path = tmp_path / "answers.csv"
    path.write_text('id,contexts,answer\na,"[""The fee is 5 euros.""]",The fee is 5 euros.\n'
                    f"b,{DEEP['array']},The fee is 5 euros.\nc,[not json,The fee is 5 euros.\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(path), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 0, result.output
    contexts = {row["id"]: row["record"]["contexts"] for row in map(json.loads, out.read_text().splitlines())}
    assert contexts["a"] == ["The fee is 5 euros."] and contexts["b"] == [DEEP["array"]] and contexts["c"] == ["[not json"]
