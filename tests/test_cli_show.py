"""What the command line prints of the flagged text: `score --show` keeps every unsupported span whole (wrapped
between words, never cut) at 80 columns, `watch` prints each phrase whole, and NO_COLOR is honoured."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord, Span

ANSWER = ("The dormitory costs 2,500 roubles a month and includes unlimited laundry, breakfast and a parking place "
          "for every resident of the campus.")
ROWS = [{"id": "dorm", "contexts": ["The dormitory costs 1,879 roubles a month."], "answer": ANSWER},
        {"id": "empty", "contexts": ["The dormitory costs 1,879 roubles a month."], "answer": ""}]
COLOR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")  # SGR foreground/background


def score(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    environ = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    return subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", str(path), *args],
                          env={**environ, **env}, capture_output=True, text=True, timeout=300)


def cells(table: str) -> dict[str, list[str]]:
    """The per-record table's last column, each record's cell lines joined: id -> text."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in table.splitlines():
        if not line.startswith("│"):
            continue
        parts = [cell.strip() for cell in line.split("│")[1:-1]]
        if parts[0]:
            current = parts[0]
        assert current is not None
        rows.setdefault(current, []).append(parts)
    return {key: [" ".join(filter(None, column)) for column in zip(*lines, strict=True)] for key, lines in rows.items()}


def test_show_at_80_columns_keeps_every_flagged_span_whole(tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    done = score(tmp_path, "-m", "lexical,facts,grounding", "--show", "5", "-o", str(out), COLUMNS="80")
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("Scores", 1)[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if '"dorm"' in line]
    spans = sorted((span for s in row["scores"] for span in s["spans"]), key=lambda sp: (sp["start"], sp["end"]))
    texts = list(dict.fromkeys(" ".join(span["text"].split()) for span in spans))
    assert any(len(text) > 40 for text in texts), texts  # a span longer than the column: it must wrap
    shown = cells(table)["dorm"]
    assert shown[-1] == " ".join(f'"{text}"' for text in texts)  # each whole, in the answer's order
    answer = shown[1]
    assert answer.endswith(" …") and ANSWER.startswith(answer[:-2])
    assert ANSWER[len(answer) - 2] == " "  # the answer's beginning ends between two words


def test_no_color_keeps_the_styles_out_of_a_terminal(tmp_path: Path) -> None:
    # FORCE_COLOR makes the pipe a terminal for rich; NO_COLOR must still remove every colour
    coloured = score(tmp_path, "-m", "lexical", "--show", "5", FORCE_COLOR="1", COLUMNS="100")
    plain = score(tmp_path, "-m", "lexical", "--show", "5", FORCE_COLOR="1", NO_COLOR="1", COLUMNS="100")
    assert coloured.returncode == plain.returncode == 0, plain.stderr
    assert COLOR.search(coloured.stderr), coloured.stderr  # the yellow failure line, the bar's colours
    assert not COLOR.search(plain.stdout + plain.stderr), (plain.stdout + plain.stderr)[:2000]
    assert "lexical: 1 of 2 records failed" in re.sub(r"\x1b\[[0-9;]*m", "", plain.stderr)


def test_watch_prints_a_long_flagged_phrase_whole(tmp_path: Path) -> None:
    phrase = "breakfast and a parking place for every resident of the campus"
    start = ANSWER.index(phrase)
    row = ScoredRecord(record=Record(id="dorm", question="What does it cost?", answer=ANSWER), scores=[
        Score(metric="grounding", value=0.94, higher_is_better=False, hallucinated=True, threshold=0.5,
              spans=[Span(start=start, end=start + len(phrase), text=phrase)])])
    path = tmp_path / "scores.jsonl"
    path.write_text(row.model_dump_json() + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["watch", str(path), "--no-follow"])
    assert result.exit_code == 0, result.output
    assert f'    "{phrase}"\n' in result.stdout
