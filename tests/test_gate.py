"""The CI gate: `groundtrace score FILE --max-flagged METRIC=SHARE` exits 1 when more than SHARE of the
records are flagged by METRIC, counting the records it could not score as flagged, one line per gate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.batch.gate import Gate
from tests.hand_checked import CONTEXT, COPY, ZEBRAS

runner = CliRunner()
# lexical by hand (tests/hand_checked.py): the copy scores 1.0, the two answers with none of their keywords in
# the context 0.0 (flagged below 0.4), the empty answer cannot be scored: 3 of 4 count against a lexical gate
ROWS = [
    {"id": "copy", "contexts": [CONTEXT], "answer": COPY},
    {"id": "zebras", "contexts": [CONTEXT], "answer": ZEBRAS},
    {"id": "comets", "contexts": [CONTEXT], "answer": "Comets orbit distant stars."},
    {"id": "empty", "contexts": [CONTEXT], "answer": ""},
]


@pytest.fixture
def answers(tmp_path: Path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def gate_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("gate ")]


def test_a_gate_that_holds_exits_0_and_says_so(answers: Path) -> None:
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical", "--max-flagged", "lexical=0.8"])
    assert result.exit_code == 0, result.output
    assert gate_lines(result.output) == [
        "gate passed: lexical flagged 3 of 4 records (75.0%: 2 flagged, 1 could not be scored), at most the allowed 80.0%"]


def test_a_share_equal_to_the_limit_passes(answers: Path) -> None:
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical", "--max-flagged", "lexical=75%"])
    assert result.exit_code == 0, result.output


def test_a_failed_gate_exits_1_with_one_line_per_gate_and_the_file_is_still_written(answers: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical,facts", "-o", str(out),
                                 "--max-flagged", "lexical=0.5", "--max-flagged", "facts=100%"])
    assert result.exit_code == 1, result.output
    lexical, facts = gate_lines(result.output)
    assert lexical == ("gate failed: lexical flagged 3 of 4 records (75.0%: 2 flagged, 1 could not be scored), "
                       "more than the allowed 50.0%")
    assert re.fullmatch(r"gate passed: facts flagged \d of 4 records \(\d+\.\d%: \d flagged, 1 could not be scored\), "
                        r"at most the allowed 100\.0%", facts), facts
    assert len(out.read_text(encoding="utf-8").splitlines()) == 4


def test_a_gate_on_a_file_with_no_records_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["score", str(empty), "-m", "lexical", "--max-flagged", "lexical=1"])
    assert result.exit_code == 1
    assert gate_lines(result.output) == ["gate failed: lexical scored no record (allowed flagged share 100.0%)"]


@pytest.mark.parametrize(("spec", "message"), [
    ("lexical", "--max-flagged 'lexical' is not METRIC=SHARE (e.g. grounding=0.1 or grounding=10%)"),
    ("lexical=lots", "--max-flagged 'lexical=lots': 'lots' is not a share (a number in [0, 1], or a percentage)"),
    ("lexical=1.5", "--max-flagged 'lexical=1.5': the share must lie in [0, 1] (or 0% to 100%), got 1.5"),
    ("facts=0.1", "--max-flagged facts=...: facts is not among the metrics scored (lexical); add it to -m"),
])
def test_a_bad_gate_is_refused_before_scoring_with_exit_2(answers: Path, tmp_path: Path, spec: str, message: str) -> None:
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(answers), "-m", "lexical", "-o", str(out), "--max-flagged", spec])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert not out.exists()


def test_gate_parse_reads_shares_and_percentages() -> None:
    assert Gate.parse("grounding=0.1") == Gate("grounding", 0.1)
    assert Gate.parse(" facts = 5% ") == Gate("facts", 0.05)
