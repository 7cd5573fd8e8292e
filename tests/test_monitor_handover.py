"""isolation="process": the application hands each record over once; the scoring process masks, scores and
delivers to the sinks that can run there, and sends Scores back only for the application's own sinks."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

import pytest

from groundtrace import Record
from groundtrace.config import Settings
from groundtrace.monitor import Monitor
from groundtrace.score import Score
from tests.custom_sinks import PlainSink
from tests.test_monitor import submit_from_eight_threads

PROBE = '''
import os, time
from groundtrace.metrics import Metric, Result
from groundtrace.sinks import Sink

class WherePid(Metric):
    name = "where_pid"
    higher_is_better = True
    default_threshold = 0.5
    def compute(self, record, language):
        return Result(1.0, "ok", details={"pid": os.getpid()})

class SlowPid(WherePid):
    name = "slow_pid"
    def compute(self, record, language):
        time.sleep(0.1)
        return Result(1.0, "ok", details={"pid": os.getpid()})

class PidSink(Sink):
    """Writes "pid record-id" per record to <jsonl_path>.pids: which process delivered what."""
    name = "pids"
    out_of_process = True
    def __init__(self, path):
        self.handle = open(path, "a", buffering=1)
    @classmethod
    def from_settings(cls, settings):
        return cls(settings.jsonl_path + ".pids")
    def emit(self, record, scores):
        self.handle.write(f"{os.getpid()} {record.id}\\n")
    def close(self):
        self.handle.close()

def shout(text):
    """A mask importable by name; it notes the process it ran in."""
    with open(os.environ["PROBE_MASK_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")
    return text.upper()
'''


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """Metrics (an entry point), a sink and a mask in a module that only this process's sys.path finds:
    the scoring process gets that path from the application, not from PYTHONPATH."""
    (tmp_path / "probe_handover.py").write_text(PROBE)
    info = tmp_path / "probe_handover-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-handover\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[groundtrace.metrics]\nwhere_pid = probe_handover:WherePid\nslow_pid = probe_handover:SlowPid\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PROBE_MASK_LOG", str(tmp_path / "mask.log"))
    return tmp_path


def rec(i: int, **fields) -> Record:
    return Record(id=str(i), trace_id=f"{i:032x}", question="Who writes to anna@example.com?",
                  contexts=["The fee is 100 roubles."], answer="The fee is 100 roubles.", **fields)


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_named_sinks_are_fed_by_the_scoring_process_and_the_application_parses_no_score(probe, monkeypatch):
    out = probe / "scores.jsonl"
    settings = Settings(jsonl_path=str(out))

    def parsed_here(*args, **kwargs):
        raise AssertionError("the application parsed a Score")

    with Monitor(["where_pid"], ["jsonl", "probe_handover:PidSink"], settings=settings, flush_at_exit=False) as monitor:
        monkeypatch.setattr(Score, "model_validate", classmethod(parsed_here))
        for i in range(50):
            assert monitor.submit(rec(i))
        assert monitor.flush(60)
        stats = monitor.stats
    assert (stats.submitted, stats.scored, stats.failed, stats.sink_errors) == (50, 50, 0, 0)
    rows = lines(out)
    assert sorted(int(row["id"]) for row in rows) == list(range(50))
    child = {row["scores"][0]["details"]["pid"] for row in rows}
    assert len(child) == 1 and os.getpid() not in child
    delivered = [line.split() for line in (probe / "scores.jsonl.pids").read_text().splitlines()]
    assert {int(pid) for pid, _ in delivered} == child and len(delivered) == 50
    assert stats.cpu_s > 0  # the scoring process reports what it used


def test_the_applications_own_sinks_get_the_scores_back_and_a_named_mask_runs_in_the_scoring_process(probe):
    import probe_handover

    out, mine = probe / "scores.jsonl", PlainSink()
    with Monitor(["lexical"], [mine, f"jsonl:{out}"], mask=probe_handover.shout, flush_at_exit=False) as monitor:
        for i in range(5):
            monitor.submit(rec(i))
        assert monitor.flush(60)
    masked_in = {int(pid) for pid in (probe / "mask.log").read_text().split()}
    assert masked_in and os.getpid() not in masked_in  # a module-level function travels by name
    assert sorted(r.id for r, _ in mine.got) == [str(i) for i in range(5)]
    assert all(r.question == "WHO WRITES TO ANNA@EXAMPLE.COM?" and r.answer == "THE FEE IS 100 ROUBLES." for r, _ in mine.got)
    assert all(isinstance(s, Score) and s.ok for _, scores in mine.got for s in scores)
    assert [row["record"]["answer"] for row in lines(out)] == ["THE FEE IS 100 ROUBLES."] * 5


def test_a_mask_that_cannot_travel_runs_here_before_the_record_leaves(probe):
    out, seen = probe / "scores.jsonl", []

    def closure(text: str) -> str:  # a closure has no name another process could load it by
        seen.append(os.getpid())
        return text.replace("anna@example.com", "<email>")

    with Monitor(["lexical"], [f"jsonl:{out}"], mask=closure, flush_at_exit=False) as monitor:
        monitor.submit(rec(1))
        assert monitor.flush(60)
    assert set(seen) == {os.getpid()}
    [row] = lines(out)
    assert row["record"]["question"] == "Who writes to <email>?"


def test_capture_text_off_and_a_failing_mask_are_applied_by_the_scoring_process(probe, caplog):
    out = probe / "scores.jsonl"
    with Monitor(["lexical"], [f"jsonl:{out}"], capture_text=False, flush_at_exit=False) as monitor:
        monitor.submit(rec(1))
        assert monitor.flush(60)
    [row] = lines(out)
    assert row["record"]["question"] is None and row["record"]["contexts"] is None and row["record"]["answer"] is None
    assert row["record"]["trace_id"] == f"{1:032x}" and row["scores"][0]["reason"] == ""
    failing = probe / "failing.jsonl"
    with Monitor(["lexical"], [f"jsonl:{failing}"], mask="tests.privacy_masks:refuse", flush_at_exit=False) as monitor:
        monitor.submit(rec(2))
        assert monitor.flush(60)
        assert (monitor.stats.failed, monitor.stats.scored) == (1, 0)
    [row] = lines(failing)
    assert {k: v for k, v in row["record"].items() if v not in (None, {}, [])} == {"id": "2"}
    assert row["scores"][0]["error"].startswith("invalid record: the mask raised ValueError")
    # the scoring process's warning is logged here, and quotes no text
    assert "record 2 not scored" in caplog.text and "(in the scoring process)" in caplog.text
    assert "anna" not in caplog.text and "roubles" not in caplog.text


def test_a_scoring_process_that_cannot_start_hands_scoring_to_threads_with_the_mask_applied_here(tmp_path,
                                                                                                  monkeypatch, caplog):
    from groundtrace.scoring.process import ScoringProcess

    monkeypatch.setattr(ScoringProcess, "_command", lambda self: [sys.executable, "-c", "print('no protocol')"])
    out, mine = tmp_path / "scores.jsonl", PlainSink()
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [mine, f"jsonl:{out}"], mask="tests.privacy_masks:hide_emails",
                    flush_at_exit=False) as monitor:
        for i in range(3):
            monitor.submit(rec(i))
        assert monitor.flush(60)
        stats = monitor.stats
    assert (stats.submitted, stats.failed, stats.scored) == (3, 0, 3)
    for record, [score] in mine.got:  # the mask that was to run in the child ran here, before any sink
        assert record.question == "Who writes to <email>?" and score.ok
    assert [row["record"]["question"] for row in lines(out)] == ["Who writes to <email>?"] * 3  # fed from here
    assert any("the scoring process cannot start (the scoring process did not start: no protocol)" in r.getMessage()
               for r in caplog.records)


def test_ten_thousand_submits_from_eight_threads_all_settle_and_reach_the_file(tmp_path):
    out = tmp_path / "scores.jsonl"
    monitor = Monitor(["lexical"], [f"jsonl:{out}"], queue_size=20_000, workers=2, flush_at_exit=False)
    submit_from_eight_threads(monitor, rec)
    assert monitor.flush(180)
    monitor.close()
    stats = monitor.stats
    assert stats.submitted == 10_000 == stats.settled
    assert stats.scored + stats.dropped == 10_000 and stats.failed == 0
    rows = lines(out)
    assert len(rows) == stats.scored and len({row["id"] for row in rows}) == stats.scored
    assert all(score["error"] is None for row in rows for score in row["scores"])


def test_a_scoring_process_killed_mid_batch_costs_one_record_and_a_fresh_one_goes_on(probe):
    """20 records in one batch, 0.1 s each; the process is killed while it scores the fourth or so. That
    record is delivered with error Scores by the next process, which scores the rest."""
    out = probe / "scores.jsonl"
    monitor = Monitor(["slow_pid"], [f"jsonl:{out}"], flush_at_exit=False)
    try:
        for i in range(20):
            monitor.submit(rec(i))
        deadline = time.monotonic() + 60
        while (not out.exists() or len(lines(out)) < 3) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.03)  # into the next record's 0.1 s of scoring
        first = lines(out)[0]["scores"][0]["details"]["pid"]
        os.kill(first, signal.SIGKILL)
        assert monitor.flush(60)
        stats = monitor.stats
    finally:
        monitor.close()
    assert stats.submitted == 20 == stats.settled
    assert (stats.scored, stats.failed) == (19, 1)
    rows = {row["id"]: row["scores"][0] for row in lines(out)}
    assert sorted(rows, key=int) == [str(i) for i in range(20)]  # every record delivered, once
    [died] = [score for score in rows.values() if score["error"] is not None]
    assert died["error"] == "the scoring process died"
    pids = {score["details"]["pid"] for score in rows.values() if score["error"] is None}
    assert first in pids and len(pids) == 2
