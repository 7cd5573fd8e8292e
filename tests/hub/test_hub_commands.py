"""The hub metrics through the command line (score, bench, report), the Monitor (threads and its default
scoring process), and the one clear error for a model that is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.score import ScoredRecord
from tests.test_monitor import Collect

runner = CliRunner()
CONTEXT = "The capital of France is Paris. The Eiffel Tower was built in 1889 for the world fair."
ROWS = [
    {"id": "good", "question": "What is the capital of France?", "contexts": [CONTEXT],
     "answer": "The capital of France is Paris.", "label": 0, "spans": []},
    {"id": "bad", "question": "What is the capital of France?", "contexts": [CONTEXT],
     "answer": "The capital of France is purple. Dragons flew to Mars in 1999.", "label": 1,
     "spans": [{"start": 25, "end": 31, "text": "purple", "type": "baseless"}]},
    {"id": "zh", "question": "法国的首都是哪里?", "contexts": ["巴黎 是 法国 的 首都"], "answer": "巴黎 是 法国 的 首都", "label": 0,
     "spans": []},
]
MISSING = "nobody-here/no-such-detector"


@pytest.fixture
def answers(tmp_path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    return path


def options(models) -> list[str]:
    return ["-O", f"lettuce.model={models['lettuce']}", "-O", f"nli.model={models['nli3']}"]


def direct(models, row) -> dict[str, tuple]:
    record = Record.model_validate(row)
    return {name: _key(get_metric(name, model=str(models[m])).score(record))
            for name, m in (("lettuce", "lettuce"), ("nli", "nli3"))}


def _key(score) -> tuple:
    return (round(score.value, 6), score.hallucinated, [(s.start, s.end, s.text, s.score) for s in score.spans])


def test_score_writes_the_metrics_scores_and_spans(models, answers, tmp_path):
    output = tmp_path / "scored.jsonl"
    result = runner.invoke(app, ["score", str(answers), "-m", "lettuce,nli", *options(models), "-o", str(output)])
    assert result.exit_code == 0, result.output
    rows = [ScoredRecord.model_validate_json(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r.id for r in rows] == ["good", "bad", "zh"]
    for row, raw in zip(rows, ROWS, strict=True):
        assert {s.metric: _key(s) for s in row.scores} == direct(models, raw)
    bad = rows[1].score("lettuce")
    assert bad is not None and bad.hallucinated and "purple" in [s.text for s in bad.spans]
    assert rows[2].score("lettuce").details["lang"] == "cn"
    assert "lettuce" in result.stdout and "nli" in result.stdout


def test_bench_measures_both(models, answers):
    result = runner.invoke(app, ["bench", str(answers), "-m", "lettuce,nli", *options(models), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["lettuce"]["n"] == 3 and report["lettuce"]["errors"] == 0
    assert report["lettuce"]["auc"] == 1.0  # the tiny model flags exactly the invented words
    assert report["lettuce"]["spans"]["records"] == 3 and report["lettuce"]["spans"]["recall"] == 1.0
    assert report["nli"]["n"] == 3 and report["nli"]["errors"] == 0


def test_report_marks_their_spans(models, answers, tmp_path):
    output = tmp_path / "scored.jsonl"
    assert runner.invoke(app, ["score", str(answers), "-m", "lettuce", *options(models)[:2], "-o", str(output)]).exit_code == 0
    result = runner.invoke(app, ["report", str(output), "-o", str(tmp_path / "r.html"), "--labels", str(answers)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "lettuce" in page and "purple" in page and "lettuce: unsupported" in page


def test_the_monitor_scores_in_threads_and_in_its_scoring_process(models):
    expected = {row["id"]: direct(models, row) for row in ROWS}
    for isolation in ("thread", "auto"):
        sink = Collect()
        with Monitor(["lettuce", "nli"], [sink], isolation=isolation, flush_at_exit=False, metric_timeout_s=60,
                     options={"lettuce": {"model": str(models["lettuce"])}, "nli": {"model": str(models["nli3"])}}) as monitor:
            assert monitor.isolation == ("thread" if isolation == "thread" else "process")
            for row in ROWS:
                monitor.submit(Record.model_validate(row))
            assert monitor.flush(timeout=120)
        got = {record.id: {s.metric: _key(s) for s in scores} for record, scores in sink.rows}
        assert got == expected, isolation
        assert monitor.stats.scored == 3 and monitor.stats.failed == 0


def test_the_monitor_gives_a_missing_model_an_error_score_per_record(hub_offline):
    sink = Collect()
    with Monitor(["nli"], [sink], isolation="thread", flush_at_exit=False, options={"nli": {"model": MISSING}}) as monitor:
        for row in ROWS:
            assert monitor.submit(Record.model_validate(row))
        assert monitor.flush(timeout=30)
    errors = [scores[0].error for _, scores in sink.rows]
    assert len(errors) == 3 and all(e and MISSING in e and "hf download" in e for e in errors)
    assert monitor.stats.failed == 3


def test_a_missing_model_is_one_error_naming_it_in_process(hub_offline, answers):
    score = get_metric("lettuce", model=MISSING).score(Record.model_validate(ROWS[0]))
    assert not score.ok and MISSING in score.error and f"hf download {MISSING}" in score.error
    assert "\n" not in score.error and "Traceback" not in score.error
    result = runner.invoke(app, ["score", str(answers), "-m", "nli", "-O", f"nli.model={MISSING}"])
    assert result.exit_code == 2 and MISSING in result.output
    result = runner.invoke(app, ["bench", str(answers), "-m", "lettuce", "-O", f"lettuce.model={MISSING}"])
    assert result.exit_code == 2 and MISSING in result.output


def test_a_folder_that_is_no_model_is_one_error(tmp_path, answers):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["score", str(answers), "-m", "nli", "-O", f"nli.model={tmp_path / 'empty'}"])
    assert result.exit_code == 2 and "has no config.json" in result.output


# Run in a child process as a user would run it: every connect() or name lookup to somewhere other than this
# machine is written to a file (and refused).
GUARD = textwrap.dedent("""
    import os, socket
    _connect, _lookup, _log = socket.socket.connect, socket.getaddrinfo, os.environ["NETWORK_LOG"]
    def _note(what):
        with open(_log, "a") as f:
            f.write(what + "\\n")
    def connect(sock, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            _note(f"connect {address[0]}")
            raise ConnectionRefusedError(address[0])
        return _connect(sock, address)
    def getaddrinfo(host, *args, **kwargs):
        if host not in (None, "127.0.0.1", "::1", "localhost"):
            _note(f"lookup {host}")
            raise socket.gaierror(host)
        return _lookup(host, *args, **kwargs)
    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
""")


@pytest.mark.parametrize("metric", ["lettuce", "nli"])
def test_the_command_line_says_a_missing_model_in_one_line_fast_without_the_network(answers, tmp_path, metric):
    (tmp_path / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NETWORK_LOG": str(log), "COLUMNS": "80",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", str(answers), "-m", metric,
                           "-O", f"{metric}.model={MISSING}"], env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - started
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2
    assert len(lines) == 1 and lines[0].startswith("error: ") and MISSING in lines[0], lines
    assert f"hf download {MISSING}" in lines[0] and "HF_HUB_OFFLINE" in lines[0]
    assert took < 20, took  # no retries: the cache is read and nothing else
    assert not log.exists(), log.read_text()
    assert "torch" not in done.stderr  # nothing was loaded to find out


def test_a_model_folder_that_does_not_load_is_one_error_on_the_command_line_and_per_record(tmp_path, answers):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "bert"}))  # no weights, no tokenizer
    result = runner.invoke(app, ["score", str(answers), "-m", "nli", "-O", f"nli.model={broken}"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert f"model '{broken}' could not be loaded" in lines[0]
    score = get_metric("nli", model=str(broken)).score(Record.model_validate(ROWS[0]))
    assert not score.ok and "could not be loaded" in score.error and "Traceback" not in score.error
