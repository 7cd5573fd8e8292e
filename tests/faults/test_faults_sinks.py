"""Sinks under faults, with real parts: a folder removed under the jsonl file, a 64 KiB tmpfs that fills up, a
sink whose emit() takes seconds, an OTLP endpoint that is down. The application's calls return at once, every
record is delivered or counted in sink_errors (the counts reconcile), a failure is said as a rate, and no
line is ever torn."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundtrace.config import Settings
from groundtrace.io import read_scored
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.score import ScoredRecord
from groundtrace.sinks.jsonl import JsonlSink
from groundtrace.sinks.otel import OTelSink
from tests.custom_sinks import PlainSink

CONTEXT = "The museum opens at 9 am and closes at 6 pm every day of the week."


def record(i: int, answer: str = "It opens at 9 am.") -> Record:
    return Record(id=f"r{i}", question="When does the museum open?", contexts=[CONTEXT], answer=answer)


def lines(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


def test_the_jsonl_file_comes_back_after_its_folder_is_removed_or_rotated(tmp_path, caplog):
    path = tmp_path / "logs" / "scores.jsonl"
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [f"jsonl:{path}"], isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(record(0))
        assert monitor.flush(10)
        shutil.rmtree(path.parent)  # a cleanup job
        monitor.submit(record(1))
        assert monitor.flush(10)
        assert [row["id"] for row in lines(path)] == ["r1"]  # opened anew, its folder made again
        path.rename(path.with_suffix(".jsonl.1"))  # log rotation
        monitor.submit(record(2))
        assert monitor.flush(10)
        stats = monitor.stats
    assert [row["id"] for row in lines(path)] == ["r2"]
    assert [row["id"] for row in lines(path.with_suffix(".jsonl.1"))] == ["r1"]
    assert (stats.scored, stats.sink_errors) == (3, 0)


def test_a_path_that_cannot_be_opened_at_start_up_is_no_error_and_heals(tmp_path, caplog):
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    path = blocker / "scores.jsonl"
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [f"jsonl:{path}"], isolation="thread", flush_at_exit=False) as monitor:  # builds
        for i in range(5):
            monitor.submit(record(i))
        assert monitor.flush(10)
        assert monitor.stats.sink_errors == 5  # counted, each one
        blocker.unlink()
        monitor.submit(record(5))
        assert monitor.flush(10)
        stats = monitor.stats
    assert [row["id"] for row in lines(path)] == ["r5"]
    assert (stats.scored, stats.sink_errors) == (6, 5)
    said = [r.getMessage() for r in caplog.records if "sink jsonl failed" in r.getMessage()]
    assert said[0].startswith("groundtrace: sink jsonl failed: record r0: FileExistsError")
    assert len(said) <= 2  # a rate: the first, and at most a summary at close


def _mount_tmpfs(where: Path) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "small"
    if os.geteuid() != 0 or shutil.which("mount") is None or not _mount_tmpfs(where):
        pytest.skip("a 64 KiB tmpfs needs root and mount (it fills a real disk; not run where it cannot be made)")
    yield where
    subprocess.run(["umount", str(where)], check=False)


def test_a_full_disk_tears_no_line_and_every_record_is_written_or_counted(small_disk, caplog):
    path = small_disk / "scores.jsonl"
    answer = "It opens at 9 am. " * 120  # about 5 KiB a line: the disk fills after a dozen
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [f"jsonl:{path}"], isolation="thread", flush_at_exit=False) as monitor:
        for i in range(40):
            monitor.submit(record(i, answer))
        assert monitor.flush(30)
        stats = monitor.stats
    written = lines(path)  # every line whole
    assert 0 < len(written) < 40
    assert stats.scored == 40 and stats.sink_errors == 40 - len(written)  # the counts reconcile exactly
    said = [r.getMessage() for r in caplog.records if "sink jsonl failed" in r.getMessage()]
    assert said[0].startswith("groundtrace: sink jsonl failed: record ") and "No space left on device" in said[0]
    assert len(said) == 2 and said[1].startswith(f"groundtrace: sink jsonl failed: {40 - len(written) - 1} more")


class Slow(PlainSink):
    name = "slow"

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.after_close: list[str] = []
        self.closed = threading.Event()

    def emit(self, record, scores):
        time.sleep(self.seconds)
        if self.closed.is_set():
            self.after_close.append(record.id)
        super().emit(record, scores)


def test_a_slow_sink_starves_no_other_and_close_counts_what_it_did_not_deliver(caplog):
    slow, quick = Slow(5.0), PlainSink()
    monitor = Monitor(["lexical"], [slow, quick], isolation="thread", flush_at_exit=False)
    started = time.monotonic()
    for i in range(30):
        assert monitor.submit(record(i))
    submitting = time.monotonic() - started
    deadline = time.monotonic() + 10
    while len(quick.got) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    quick_done = time.monotonic() - started
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        closing = time.monotonic()
        monitor.close(timeout=2.0)
        closed_in = time.monotonic() - closing
    slow.closed.set()
    time.sleep(5.5)  # long enough for the emit that was running at close to end
    assert submitting < 0.5 and len(quick.got) == 30 and quick_done < 5  # the quick sink got all at once
    assert closed_in < 5  # close() gives up on the slow one within its time (plus the worker's join)
    stats = monitor.stats
    # each record: delivered before close returned, or counted; the emit still running at close is counted there
    # (it might never return), whatever it does later
    assert len(slow.after_close) == 1  # only the emit already running at close: none started after it
    assert (len(slow.got) - len(slow.after_close)) + stats.sink_errors == 30
    assert any("sink slow: " in r.getMessage() and "not delivered when the Monitor closed" in r.getMessage()
               for r in caplog.records)


def test_spans_an_otlp_endpoint_down_did_not_take_are_sink_errors(monkeypatch, caplog):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # this process has no provider of its own
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings.from_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}/v1/traces",
                                  "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    sink = OTelSink.from_settings(settings)
    traced = [record(i).model_copy(update={"trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"}) for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        for item in traced:
            monitor.submit(item)
        assert monitor.flush(60) is True
        stats = monitor.stats
    assert (stats.scored, stats.sink_errors) == (3, 3)  # not counted as delivered
    assert any("the otel sink's spans were not delivered" in r.getMessage() for r in caplog.records)


def test_a_sink_that_keeps_failing_is_said_as_a_rate_not_a_line_per_record(caplog):
    class Down:
        def emit(self, record, scores):
            raise ConnectionError("the collector is down")

    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [Down()], isolation="thread", flush_at_exit=False) as monitor:
        for i in range(50):
            monitor.submit(record(i))
        assert monitor.flush(20)
        stats = monitor.stats
    said = [r.getMessage() for r in caplog.records if "sink Down failed" in r.getMessage()]
    assert stats.sink_errors == 50
    assert said == ["groundtrace: sink Down failed: record r0: ConnectionError: the collector is down (said once, then "
                    "as a count at most every 60 s)",
                    "groundtrace: sink Down failed: 49 more (last: record r49: ConnectionError: the collector is down)"]


def test_what_a_jsonl_sink_writes_is_whole_lines_read_back_as_scored_records(tmp_path):
    sink = JsonlSink(tmp_path / "a" / "b.jsonl")
    from groundtrace.metrics import get_metric

    scored = record(0)
    sink.emit(scored, [get_metric("lexical").score(scored)])
    sink.close()
    [row] = (tmp_path / "a" / "b.jsonl").read_text().splitlines()
    assert ScoredRecord.model_validate_json(row).record.id == "r0"
    with pytest.raises(RuntimeError, match="is closed"):
        sink.emit(scored, [])


# a writer process: appends lines of 0.3 to 3 KiB through the real JsonlSink until told to stop, and prints the id
# of each line emit() returned for (acknowledged: the caller was told it is written)
_WRITER = """
import sys
from pathlib import Path
from groundtrace.record import Record
from groundtrace.sinks.jsonl import JsonlSink

who, path, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
sink = JsonlSink(path)
(go.parent / f"ready-{who}").touch()
while not go.exists():  # both start together: the race is the point
    pass
for i in range(3000):
    answer = "It opens at 9 am. " * (16 + (i * 37) % 160)
    line = Record(id=f"{who}-{i}", question="When does the museum open?", contexts=["9 am"], answer=answer)
    try:
        sink.emit(line, [])
    except OSError:
        continue
    print(line.id, flush=True)
sink.close()
"""


def test_two_writers_on_a_full_disk_cut_back_only_their_own_bytes(tmp_path):
    where = tmp_path / "disk"
    where.mkdir()
    # 256 KiB: a few hundred lines fill it, and each writer goes on at the full disk's edge for a thousand more
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True)
    if os.geteuid() != 0 or mounted.returncode != 0:
        pytest.skip(f"two writers filling a real disk need a 256 KiB tmpfs, and mount needs root: "
                    f"{mounted.stderr.decode(errors='replace').strip() or 'not root'}")
    try:
        path, go = where / "scores.jsonl", tmp_path / "go"
        writers = [subprocess.Popen([sys.executable, "-c", _WRITER, who, str(path), str(go)], stdout=subprocess.PIPE,
                                    text=True) for who in ("a", "b")]
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{who}").exists() for who in "ab") and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()
        acknowledged = [line.strip() for writer in writers for line in writer.communicate(timeout=120)[0].split()]
        assert [writer.returncode for writer in writers] == [0, 0]
        data = path.read_bytes()
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
    assert b"\0" not in data  # no cut-back ever made the file longer than it was
    assert data.endswith(b"\n")  # no torn last line
    skipped: list[str] = []
    (tmp_path / "read.jsonl").write_bytes(data)  # read off the disk, as report and review read it
    found = [row.record.id for row in read_scored(tmp_path / "read.jsonl", skipped)]
    assert skipped == []  # no fragment, glued or alone
    assert sorted(found) == sorted(acknowledged)  # each acknowledged line whole, once; nothing else
    assert 100 < len(acknowledged) < 6000  # the disk did fill, both wrote


def test_a_torn_write_another_writer_appended_after_is_blanked_in_place_not_cut(tmp_path, monkeypatch):
    # a writer that takes no lock (another program) appends right after this writer's partial bytes: truncating
    # would cut its line and a fragment left would glue onto it, so the partial bytes become a blank line
    path = tmp_path / "scores.jsonl"
    sink = JsonlSink(path)
    sink.emit(record(0), [])
    foreign = b'{"id": "theirs"}\n'
    real_write = os.write

    def full_disk_then_another(fd, data):
        if fd != sink._fd:
            return real_write(fd, data)
        taken = real_write(fd, data[:100])  # the disk took 100 bytes
        other = os.open(path, os.O_WRONLY | os.O_APPEND)
        real_write(other, foreign)
        os.close(other)
        return taken

    monkeypatch.setattr(os, "write", full_disk_then_another)
    with pytest.raises(OSError, match="No space left on device"):
        sink.emit(record(1), [])
    monkeypatch.undo()
    sink.emit(record(2), [])
    sink.close()
    first, blank, theirs, last = path.read_bytes().splitlines(keepends=True)
    assert (json.loads(first)["id"], blank, theirs, json.loads(last)["id"]) == ("r0", b" " * 99 + b"\n", foreign, "r2")
