"""From live capture to a fitted verdict with no glue: an app runs into the default store, a reviewer labels through
the review app's API, `fit` and `bench` read the store and the labels file and nothing else, and the app run again
with only GROUNDTRACE_VERDICT_FILE set is scored with the fitted verdict."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import groundtrace
from groundtrace.cli import app
from groundtrace.config import Settings
from groundtrace.monitor import Monitor

CONTEXT = "The museum opens at 9 am and closes at 6 pm; entry costs 12 euros."
FAITHFUL = ["It opens at 9 am.", "It closes at 6 pm.", "Entry costs 12 euros.", "The museum opens at 9 am."]
MADE_UP = ["It opens at 7 am, and parking is free.", "It closes at midnight on Fridays.",
           "Entry costs 5 euros for students from Spain.", "Dogs are welcome in every gallery."]


def run_app(monitor: Monitor, n: int) -> dict[str, int]:
    """n turns of a plain-Python RAG app; each answer's truth (1: made up), by the turn's record id."""
    truth: dict[str, int] = {}

    @groundtrace.retrieval
    def search(question: str) -> list[str]:
        return [CONTEXT]

    for i in range(n):
        made_up = i % 2 == 1
        reply = (MADE_UP if made_up else FAITHFUL)[i // 2 % 4]
        with groundtrace.turn(monitor=monitor) as turn:
            search(f"question {i}")
            turn.answer = reply
        truth[turn.id] = int(made_up)
    assert monitor.flush(120)
    return truth


def test_capture_review_fit_bench_and_use_the_verdict_with_no_other_file(tmp_path, monkeypatch):
    pytest.importorskip("starlette")
    pytest.importorskip("sklearn")
    from groundtrace.io import read_scored
    from groundtrace.review.app import Review
    from tests.review.test_review_app import client_for

    monkeypatch.chdir(tmp_path)
    for name in ("GROUNDTRACE_SINKS", "GROUNDTRACE_JSONL_PATH", "GROUNDTRACE_METRICS", "GROUNDTRACE_VERDICT_FILE"):
        monkeypatch.delenv(name, raising=False)
    with Monitor(["lexical"], isolation="thread", flush_at_exit=False) as monitor:  # no sinks: the default store
        truth = run_app(monitor, 40)
    store = tmp_path / "groundtrace-scores.jsonl"
    labels = tmp_path / "groundtrace-scores.labels.jsonl"  # where `groundtrace review` puts them
    client, token = client_for(Review(list(read_scored(store)), labels, reviewer="ana"))
    for record_id, made_up in truth.items():
        saved = client.post("/api/label", json={"id": record_id, "label": "unsupported" if made_up else "supported"},
                            headers=token)
        assert saved.status_code == 200

    runner = CliRunner()
    fitted = runner.invoke(app, ["fit", str(store), "--labels", str(labels), "-m", "lexical", "-o", "verdict.json"])
    assert fitted.exit_code == 0, fitted.output
    assert "GROUNDTRACE_VERDICT_FILE=verdict.json" in " ".join(fitted.output.split())
    bench = runner.invoke(app, ["bench", str(store), "--labels", str(labels), "-m", "lexical"])
    assert bench.exit_code == 0, bench.output
    assert "lexical: 40 of 40 scores read from groundtrace-scores.jsonl" in " ".join(bench.output.split())
    bare = runner.invoke(app, ["bench", "-m", "lexical", "--json"])  # no file: the store, its labels beside it
    assert bare.exit_code == 0, bare.output
    assert json.loads(bare.stdout[bare.stdout.index("{"):])["lexical"]["n"] == 40

    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", "verdict.json")  # the one setting fit's closing line names
    monkeypatch.setenv("GROUNDTRACE_JSONL_PATH", str(tmp_path / "again.jsonl"))
    settings = Settings.from_env()
    assert settings.metrics == ["combined"]
    with Monitor.from_settings(settings, isolation="thread", flush_at_exit=False) as monitor:
        run_app(monitor, 2)
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [[s["metric"] for s in row["scores"]] for row in again] == [["combined"], ["combined"]]
    assert all(row["scores"][0]["details"]["file"] == "verdict.json" for row in again)
