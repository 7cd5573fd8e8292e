"""`groundtrace fit` end to end: a user's CSV of labelled answers, real metrics, the verdict file it
writes, and score, bench and the Monitor reading that file."""

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.backends.verdict import VerdictModel
from groundtrace.config import Settings
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.sinks.jsonl import JsonlSink

from .scripted import CONTEXT

RAGTRUTH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ragtruth_qa_dev.jsonl"
runner = CliRunner()


def labelled_csv(path: Path, n: int) -> list[dict]:
    """The first n RAGTruth answers, as a team would export them: one row each, contexts as a JSON list."""
    rows = [json.loads(line) for line in RAGTRUTH.read_text(encoding="utf-8").splitlines()[:n]]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "contexts", "answer", "label"])
        for row in rows:
            writer.writerow([row["id"], row["question"], json.dumps(row["contexts"], ensure_ascii=False), row["answer"], row["label"]])
    return rows


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fit")
    rows = labelled_csv(folder / "answers.csv", 90)
    result = runner.invoke(app, ["fit", str(folder / "answers.csv"), "-m", "lexical", "-m", "facts", "-o", str(folder / "v.json")])
    return folder, rows, result


def test_fit_prints_the_figures_and_writes_the_file(fitted):
    folder, rows, result = fitted
    assert result.exit_code == 0, result.output
    positives = sum(r["label"] for r in rows)
    text = " ".join(result.output.split())
    assert f"fit: 90 records, {positives} labelled 1" in text
    for line in ("combined", "lexical alone", "facts alone", "learning curve, ROC AUC of the combination by labels fitted on: 25:",
                 f"warning: only 90 labelled records ({positives} labelled 1)", "wrote "):
        assert line in text, line
    verdict = VerdictModel.load(folder / "v.json")
    assert verdict.metric_names == ["lexical", "facts"] and verdict.target == "balanced_accuracy"  # the default
    assert verdict.fitted["records"] == 90 and verdict.fitted["labelled_1"] == positives
    assert verdict.fitted["trained_on"][0]["name"] == "answers.csv"
    assert 0.0 < verdict.threshold < 1.0
    report = verdict.report
    assert report["combined"]["auc"] > 0.6 and report["combined"]["intervals"]["auc"][0] < report["combined"]["auc"]
    assert [row["labels"] for row in report["learning_curve"]][-1] == 90


def test_score_and_bench_read_the_file(fitted):
    folder, rows, _ = fitted
    option = f"combined.file={folder / 'v.json'}"
    out = folder / "scored.jsonl"
    result = runner.invoke(app, ["score", str(folder / "answers.csv"), "-m", "combined", "-O", option, "-o", str(out)])
    assert result.exit_code == 0, result.output
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])["scores"][0]
    verdict = VerdictModel.load(folder / "v.json")
    parts = {name: get_metric(name).score(rows[0]).hallucination_score for name in ("lexical", "facts")}
    assert first["value"] == pytest.approx(verdict.model.probability(parts, "en")[0], abs=1e-6)
    assert first["threshold"] == pytest.approx(verdict.threshold)
    bench = runner.invoke(app, ["bench", str(folder / "answers.csv"), "-m", "combined", "-O", option])
    assert bench.exit_code == 0, bench.output
    # the file it was fitted on is recognised: its figures there are in-sample
    assert "combined was trained on answers.csv" in " ".join(bench.output.split())


def test_the_monitor_reads_the_file_from_the_environment(fitted, monkeypatch, tmp_path):
    folder, rows, _ = fitted
    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(folder / "v.json"))
    monkeypatch.setenv("GROUNDTRACE_METRICS", "combined")
    sink_file = tmp_path / "scores.jsonl"
    with Monitor.from_settings(Settings.from_env(), sinks=[JsonlSink(sink_file)], isolation="thread",
                               flush_at_exit=False) as monitor:
        monitor.submit(Record(id="live-1", question=rows[1]["question"], contexts=rows[1]["contexts"], answer=rows[1]["answer"]))
        assert monitor.flush(60)
    [line] = [json.loads(line) for line in sink_file.read_text(encoding="utf-8").splitlines()]
    [score] = line["scores"]
    verdict = VerdictModel.load(folder / "v.json")
    parts = {name: get_metric(name).score(rows[1]).hallucination_score for name in ("lexical", "facts")}
    assert score["metric"] == "combined" and score["details"]["file"] == "v.json"
    assert score["value"] == pytest.approx(verdict.model.probability(parts, "en")[0], abs=1e-6)


def test_other_targets_and_json(fitted, tmp_path):
    folder, _, _ = fitted
    result = runner.invoke(app, ["fit", str(folder / "answers.csv"), "-m", "lexical", "--target", "recall>=0.8",
                                 "-o", str(tmp_path / "r.json"), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["file"] == str(tmp_path / "r.json") and printed["combined"]["recall"] >= 0.5
    assert VerdictModel.load(tmp_path / "r.json").target == "recall>=0.8"


def test_too_few_labels_and_a_bad_target_exit_2_with_the_reason(tmp_path):
    labelled_csv(tmp_path / "few.csv", 20)
    few = runner.invoke(app, ["fit", str(tmp_path / "few.csv"), "-m", "lexical", "-o", str(tmp_path / "x.json")])
    assert few.exit_code == 2 and "too few labels to fit: 20 records" in " ".join(few.output.split())
    bad = runner.invoke(app, ["fit", str(tmp_path / "few.csv"), "--target", "accuracy"])
    assert bad.exit_code == 2 and "use balanced_accuracy, mcc, f1, cost=5:1" in " ".join(bad.output.split())
    assert not (tmp_path / "x.json").exists()


@pytest.mark.usefixtures("scripted_metrics")
def test_fit_with_a_cascade_chooses_the_band_and_reports_quality_by_share(tmp_path):
    from .scripted import JUDGED

    # answers the scripted judge knows: every fifth invented, with a context that supports the others
    rows = []
    for i in range(80):
        answer = list(JUDGED)[1] if i % 5 == 0 else list(JUDGED)[0]
        rows.append({"id": f"r{i}", "question": "When does it open?", "contexts": [CONTEXT if i % 3 else CONTEXT + f" Note {i}."],
                     "answer": answer, "label": int(i % 5 == 0)})
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = runner.invoke(app, ["fit", str(path), "-m", "facts", "--escalate", "scripted_judge", "--share", "0.25",
                                 "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "escalating 25% (20 records)" in text and "go to scripted_judge" in text and "$0.01000 a record" in text
    share = VerdictModel.load(tmp_path / "c.json").cascade.share
    assert f"expected at this share: ${0.01 * share * 1000:.2f} per 1,000 records" in text
    cascade = VerdictModel.load(tmp_path / "c.json").cascade
    assert cascade is not None and cascade.metric == "scripted_judge" and cascade.share == pytest.approx(0.25, abs=0.05)
    assert cascade.model.features == ["facts", "scripted_judge"]


def test_fit_into_a_pipe_prints_its_table_whole(tmp_path):
    """`groundtrace fit ... | tee`: no terminal and no COLUMNS, so rich would cut the table to 80 columns (its cells
    ending in "…"); the commands print for a pipe at a width no table reaches."""
    import os
    import subprocess
    import sys

    labelled_csv(tmp_path / "answers.csv", 60)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("GROUNDTRACE_")}
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "fit", str(tmp_path / "answers.csv"), "-m",
                           "lexical", "-o", str(tmp_path / "v.json")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout + done.stderr
    assert "…" not in printed, printed
    assert max(len(line) for line in printed.splitlines()) > 80, printed
