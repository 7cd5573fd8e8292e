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


def perfectly_stored(tmp_path):
    """40 records with one answer, and stored lexical values that separate the labels perfectly: values lexical
    itself would never give (the same answer everywhere scores the same)."""
    rows, labels = [], []
    for i in range(40):
        made_up = i % 2 == 1
        record = Record(id=f"r{i}", question="When does the museum open?", contexts=[CONTEXT], answer="It opens at 9 am.")
        stored = Score(metric="lexical", value=0.1 if made_up else 0.9, higher_is_better=True, threshold=0.5,
                       hallucinated=made_up)
        rows.append(ScoredRecord(record=record, scores=[stored]).model_dump_json() + "\n")
        labels.append(json.dumps({"id": f"r{i}", "label": "unsupported" if made_up else "supported"}) + "\n")
    scores, labels_path = tmp_path / "scores.jsonl", tmp_path / "labels.jsonl"
    scores.write_text("".join(rows), encoding="utf-8")
    labels_path.write_text("".join(labels), encoding="utf-8")
    return scores, labels_path


def test_fit_on_a_scores_file_reuses_its_scores_instead_of_scoring_again(tmp_path):
    """fit's figures for lexical alone are those of the stored values, so nothing was scored again."""
    import pytest

    pytest.importorskip("sklearn")
    scores, labels_path = perfectly_stored(tmp_path)
    fitted = CliRunner().invoke(app, ["fit", str(scores), "--labels", str(labels_path), "-m", "lexical",
                                      "-o", str(tmp_path / "verdict.json"), "--json"])
    assert fitted.exit_code == 0, fitted.output
    report = json.loads(fitted.stdout[fitted.stdout.index("{"):])
    [alone] = report["alone"]
    assert (alone["name"], alone["auc"]) == ("lexical", 1.0)  # the same answer everywhere: lexical would give 0.5


def test_bench_on_a_scores_file_reads_its_scores_and_rescore_scores_them_here(tmp_path):
    scores, labels_path = perfectly_stored(tmp_path)
    runner = CliRunner()
    read = runner.invoke(app, ["bench", str(scores), "--labels", str(labels_path), "-m", "lexical", "--json"])
    assert read.exit_code == 0, read.output
    figures = json.loads(read.stdout[read.stdout.index("{"):])["lexical"]
    assert (figures["auc"], figures["scores_read"], figures["records_per_s"]) == (1.0, 40, None)
    table = runner.invoke(app, ["bench", str(scores), "--labels", str(labels_path), "-m", "lexical"])
    assert "lexical: 40 of 40 scores read from scores.jsonl" in " ".join(table.output.split())
    again = runner.invoke(app, ["bench", str(scores), "--labels", str(labels_path), "-m", "lexical", "--json", "--rescore"])
    assert again.exit_code == 0, again.output
    figures = json.loads(again.stdout[again.stdout.index("{"):])["lexical"]
    assert (figures["auc"], figures["scores_read"]) == (0.5, 0)  # one answer, one value: no separation
    assert figures["records_per_s"] > 0
    options = runner.invoke(app, ["bench", str(scores), "--labels", str(labels_path), "-m", "lexical", "--json",
                                  "-O", "lexical.bleu_weight=0.5"])
    assert json.loads(options.stdout[options.stdout.index("{"):])["lexical"]["scores_read"] == 0  # another setting


def test_with_no_file_score_bench_and_fit_say_where_the_default_store_would_be(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    for command in (["score"], ["bench"], ["fit"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert f"the default store {tmp_path / 'groundtrace-scores.jsonl'} (where live capture writes" in said, said
