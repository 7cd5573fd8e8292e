"""A scores file is a records file: `score` and `bench` read groundtrace's own scores files (the default store of live
capture, `score -o`) as the records they scored, and `report` with no path opens the default store as `watch` and
`review` do."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.io import read_records
from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord

CONTEXT = "The museum opens at 9 am and closes at 6 pm."


def store(path, n: int = 6):
    rows = [ScoredRecord(record=Record(id=f"r{i}", question="When does the museum open?", contexts=[CONTEXT],
                                       answer="It opens at 9 am." if i % 2 else "It opens at 7 am, with free cake."),
                         scores=[Score(metric="grounding", value=0.5, higher_is_better=False)]) for i in range(n)]
    path.write_text("".join(row.model_dump_json() + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_scores_line_reads_as_the_record_it_scored(tmp_path):
    [first, *_] = read_records(store(tmp_path / "scores.jsonl"))
    assert first == {"id": "r0", "question": "When does the museum open?", "contexts": [CONTEXT],
                     "answer": "It opens at 7 am, with free cake.", **{k: v for k, v in first.items()
                                                                       if k not in ("id", "question", "contexts", "answer")}}
    assert "scores" not in first and "record" not in first


def test_score_and_bench_read_the_default_store_and_report_opens_it_with_no_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    scores = store(tmp_path / "groundtrace-scores.jsonl")
    labels = tmp_path / "labels.jsonl"  # as the review app writes them
    labels.write_text("".join(json.dumps({"id": f"r{i}", "label": "supported" if i % 2 else "unsupported"}) + "\n"
                              for i in range(6)), encoding="utf-8")
    runner = CliRunner()
    scored = runner.invoke(app, ["score", str(scores), "-m", "lexical", "-o", str(tmp_path / "again.jsonl")])
    assert scored.exit_code == 0, scored.output
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [row["id"] for row in again] == [f"r{i}" for i in range(6)]
    assert again[0]["record"]["answer"] == "It opens at 7 am, with free cake."
    bench = runner.invoke(app, ["bench", str(scores), "--labels", str(labels), "-m", "lexical"])
    assert bench.exit_code == 0, bench.output
    assert "lexical" in bench.output
    report = runner.invoke(app, ["report"])
    assert report.exit_code == 0 and "groundtrace-scores.html: 6 records" in report.output
