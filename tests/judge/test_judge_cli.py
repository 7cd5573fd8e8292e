"""`groundtrace bench` with judge metrics against OPENAI_BASE_URL, and `groundtrace synth-hallucinations`."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner

from groundtrace.cli import app
from tests.judge.scripted import ScriptedJudge, statements, user_text, verdicts

CONTEXT = "The Eiffel Tower was completed in 1889 and is 330 metres tall."
ROWS = [
    {"id": "a", "label": 0, "answer": "The Eiffel Tower was completed in 1889."},
    {"id": "b", "label": 1, "answer": "The Eiffel Tower was completed in 1925."},
    {"id": "c", "label": 0, "answer": "It is 330 metres tall."},
    {"id": "d", "label": 1, "answer": "It is 500 metres tall."},
]


def write_rows(path, rows):
    path.write_text("".join(json.dumps({"task": "qa", "language": "en", "question": "Tell me about the Eiffel Tower.",
                                        "contexts": [CONTEXT], **row}) + "\n" for row in rows))
    return path


def wrong(body) -> bool:
    return "1925" in user_text(body) or "500 metres" in user_text(body)


def one_statement(body):
    answer = next((r["answer"] for r in ROWS if r["answer"] in user_text(body)), "warm up")
    return statements(answer)


SCRIPT = {
    "Statements": one_statement,
    "Verdicts": lambda body: verdicts(0 if wrong(body) else 1),
    "HallucinationVerdicts": lambda body: {
        "context_verdicts": [{"reason": "-", "contradicted": int(wrong(body)), "answer_quote": ""}],
        "claim_verdicts": [{"reason": "-", "supported": int(not wrong(body))}],
    },
}


@pytest.fixture
def judge_env(monkeypatch, tmp_path):
    with ScriptedJudge(SCRIPT) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("GROUNDTRACE_JUDGE_MODEL", "gpt-4o-mini")
        monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
        yield judge


def test_bench_judge_metrics_against_openai_base_url(judge_env, tmp_path):
    path = write_rows(tmp_path / "labelled.jsonl", ROWS)
    result = CliRunner().invoke(app, ["bench", str(path), "-m", "faithfulness,hallucination", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    # faithfulness counts up, hallucination down: both separate the labels perfectly
    for name, higher_is_better in (("faithfulness", True), ("hallucination", False)):
        r = report[name]
        assert r["higher_is_better"] is higher_is_better
        assert (r["n"], r["errors"], r["auc"], r["f1"], r["balanced_accuracy"]) == (4, 0, 1.0, 1.0, 1.0)
        assert r["cost"]["input_tokens"] > 0 and r["cost"]["usd"] > 0 and r["cost"]["usd_per_1000_records"] > 0
    assert all(body["model"] == "gpt-4o-mini" for body in judge_env.bodies)

    table = CliRunner().invoke(app, ["bench", str(path), "-m", "faithfulness"])
    assert table.exit_code == 0, table.output
    assert "faithfulness: judge" in table.output and "per 1,000 records" in table.output


def test_bench_reports_judge_failures_as_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    path = write_rows(tmp_path / "labelled.jsonl", ROWS)
    result = CliRunner().invoke(app, ["bench", str(path), "-m", "faithfulness", "-O", "faithfulness.max_retries=0",
                                      "-O", "faithfulness.cache=false"])
    assert result.exit_code == 0, result.output
    assert "faithfulness: 4 records failed" in result.output and "judge error (connection)" in result.output


def answer_block(body) -> str:
    return user_text(body).split('name="answer">\n')[1].split("\n")[0]


def synth_reply(body):
    if answer_block(body) == ROWS[0]["answer"]:
        return {"answer": "The Eiffel Tower was completed in 1901.", "changes": [{"kind": "contradiction", "excerpt": "1901"}]}
    # the model "forgot" to change anything in the other record
    return {"answer": "It is 330 metres tall.", "changes": []}


def test_synth_hallucinations_writes_labelled_rows(monkeypatch, tmp_path):
    with ScriptedJudge({"HallucinatedAnswer": synth_reply}) as judge:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
        source = write_rows(tmp_path / "in.jsonl", [ROWS[0], ROWS[2], {"id": "e", "answer": "no contexts", "contexts": []}])
        out = tmp_path / "out.jsonl"
        result = CliRunner().invoke(app, ["synth-hallucinations", str(source), "-o", str(out), "--base-url", judge.url,
                                          "--model", "gpt-4o-mini", "--with-originals", "--seed", "3"])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        [body] = [b for b in judge.bodies if answer_block(b) == ROWS[0]["answer"]]
    assert "1 unchanged by the model, 1 without answer or contexts, 0 failed" in " ".join(result.output.split())
    assert [(r["id"], r["label"]) for r in rows] == [("a", 0), ("a:synth", 1), ("c", 0)]
    made = rows[1]
    assert made["answer"] == "The Eiffel Tower was completed in 1901."
    assert made["spans"] == [{"start": 34, "end": 38, "text": "1901", "type": "contradiction"}]
    assert made["meta"]["source_id"] == "a" and made["meta"]["judge_model"] == "gpt-4o-mini" and made["meta"]["seed"] == 3
    assert made["meta"]["style"] in user_text(body) and body["seed"] == 3 and body["temperature"] == 0.7
    assert set(made) >= {"id", "task", "language", "question", "contexts", "answer", "label", "spans", "dataset", "split", "meta"}
    # the rows are bench-ready
    bench = CliRunner().invoke(app, ["bench", str(out), "-m", "lexical", "--json"])
    assert bench.exit_code == 0 and json.loads(bench.output)["lexical"]["n"] == 3
