"""The Monitor under faults: a scoring process that cannot start, a process that exits or is sent SIGTERM with
records queued, a small queue, a huge record. Real child processes and signals; every loss is counted and
said at WARNING."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.scoring.process import ScoringProcess
from tests.custom_sinks import PlainSink

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "The museum opens at 9 am and closes at 6 pm every day of the week."


def record(i: int, **changes) -> Record:
    fields = {"question": "When does the museum open?", "contexts": [CONTEXT], "answer": "It opens at 9 am.", **changes}
    return Record(id=f"r{i}", **fields)


def test_a_scoring_process_that_cannot_start_is_said_and_scoring_goes_on_in_threads(monkeypatch, caplog):
    # a child that dies at start-up, as one does on a broken environment or a read-only mount
    monkeypatch.setattr(ScoringProcess, "_command", lambda self: [sys.executable, "-c", "import sys; sys.exit(3)"])
    sink = PlainSink()
    with caplog.at_level(logging.WARNING, logger="groundtrace"), \
            Monitor(["lexical"], [sink], isolation="process", flush_at_exit=False) as monitor:
        for i in range(5):
            monitor.submit(record(i))
        assert monitor.flush(30)
        stats, isolation = monitor.stats, monitor.isolation
    assert (stats.scored, stats.failed, len(sink.got), isolation) == (5, 0, 5, "thread")
    [said] = [r.getMessage() for r in caplog.records if "scoring process cannot start" in r.getMessage()]
    assert "the scoring process did not start: it exited" in said
    assert "scoring goes on in this process's worker threads instead (isolation='thread'" in said


def test_a_small_queue_loses_nothing_while_the_worker_lingers_for_a_batch():
    sink = PlainSink()
    # a long linger: the worker would sit on its first record while the next ones fill a queue of 4
    with Monitor(["lexical"], [sink], isolation="thread", queue_size=4, linger_s=0.5, flush_at_exit=False) as monitor:
        for i in range(12):
            monitor.submit(record(i))
            time.sleep(0.01)
        assert monitor.flush(30)
        stats = monitor.stats
    assert (stats.dropped, stats.scored) == (0, 12)


def test_a_full_queue_is_said_with_its_count(caplog):
    sink = PlainSink()
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        with Monitor(["lexical"], [sink], isolation="thread", queue_size=2, flush_at_exit=False) as monitor:
            accepted = sum(monitor.submit(record(i)) for i in range(200))
            assert monitor.flush(30)
            stats = monitor.stats
    assert stats.dropped == 200 - accepted > 0 and stats.scored == accepted
    said = " ".join(r.getMessage() for r in caplog.records if "records dropped" in r.getMessage())
    assert "not scored: the queue was full (2 records)" in said
    counted = [int(word) for word in said.replace(":", " ").split() if word.isdigit()]
    assert stats.dropped in counted or sum(n for n in counted if n != 2) == stats.dropped


def test_the_queue_is_bounded_by_bytes_once_it_backs_up():
    big = "x" * 100_000
    with Monitor(["lexical"], "none", isolation="thread", queue_bytes=250_000, linger_s=2.0,
                 flush_at_exit=False) as monitor:
        taken = [monitor.submit(record(i, contexts=[big])) for i in range(30)]
        stats = monitor.stats
    # (one with the lingering worker), QUEUE_SIZED_FROM (8) waiting unsized, then at most 250 KB of text: two more
    kept = taken.count(True)
    assert taken == [True] * kept + [False] * (30 - kept) and kept in (10, 11) and stats.dropped == 30 - kept


def test_a_record_over_the_bounds_is_cut_and_says_so(caplog):
    sink = PlainSink()
    with Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(record(0, contexts=["word " * 1_000_000, CONTEXT], answer="It opens at 9 am. " * 10_000))
        assert monitor.flush(60)
    [(scored, scores)] = sink.got
    assert sum(map(len, scored.contexts)) == 200_000 and len(scored.answer) == 20_000
    assert scored.metadata["truncated"] == {
        "answer": {"chars": 180_000, "kept": 20_000},
        "contexts": {"chars": 5_000_000 + len(CONTEXT), "kept": 200_000, "passages": 2, "kept_passages": 1}}
    assert scores[0].ok  # scored, not refused


APP = """
import logging, sys, time
sys.path.insert(0, {root!r})
from groundtrace.metrics import Metric, register_metric
from groundtrace.metrics.base import Result
from groundtrace.monitor import Monitor
from groundtrace.record import Record

@register_metric
class Slow(Metric):
    name = "slow_for_exit"
    higher_is_better = True
    default_threshold = 0.5
    requires = ("answer",)

    def compute(self, record, language):
        time.sleep(0.05)
        return Result(1.0, "ok")

monitor = Monitor([Slow()], "none", isolation="thread", queue_size=5000, exit_flush_s=5)
for i in range({n}):
    monitor.submit(Record(id=str(i), question="q", contexts=["c"], answer="a"))
print("submitted", flush=True)
{then}
"""


def run_app(n: int, then: str, **options) -> subprocess.CompletedProcess[str]:
    source = textwrap.dedent(APP).format(root=str(ROOT), n=n, then=then)
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120, **options)


def test_records_still_queued_at_exit_are_counted_and_said():
    done = run_app(1500, "")  # the script ends at once: atexit gives the Monitor its exit_flush_s, 5 s
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "not scored when the Monitor closed" in line]
    assert len(said) == 1 and said[0].startswith("groundtrace: ")
    lost = int(said[0].split("groundtrace: ")[1].split(" record")[0])
    assert 1000 < lost < 1500  # 5 s of 50 ms records were scored, the rest counted


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM is a POSIX signal")
def test_sigterm_settles_the_queue_within_a_bound_and_says_what_was_lost():
    # the main thread wakes now and then, as an application's does: Python runs a signal's handler on the main
    # thread, and the kernel may hand SIGTERM to a worker thread, where a main thread in one long sleep(60) would
    # not run the handler until that sleep ends
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(APP).format(root=str(ROOT), n=300,
                                                                               then="while True: time.sleep(0.2)")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "submitted"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == -signal.SIGTERM  # the signal still does what it would have done
    assert took < 10  # settled within its exit_flush_s (5 s), then gone
    said = [line for line in stderr.splitlines() if "not scored when the Monitor closed" in line]
    assert len(said) == 1, stderr


def test_a_hub_model_that_keeps_failing_is_refused_at_once_behind_its_breaker(caplog):
    from groundtrace.metrics.base import Result
    from groundtrace.metrics.hub import HubModelMetric

    class Backend:
        model = "tiny/broken"

        def check(self) -> None:
            pass

        def warm_up(self) -> None:
            pass

    class Broken(HubModelMetric):
        name = "broken_hub"
        higher_is_better = True
        default_threshold = 0.5
        requires = ("answer",)
        backend = Backend()
        calls = 0

        def compute(self, record, language) -> Result:
            Broken.calls += 1
            raise RuntimeError("CUDA out of memory")

    metric = Broken()
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        scores = [metric.score(record(i)) for i in range(20)]
    assert Broken.calls == 5  # then refused without trying
    assert [s.error.split(":")[0] for s in scores[:5]] == ["RuntimeError"] * 5
    assert all("circuit breaker open" in s.error for s in scores[5:])
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1  # the traceback once, not per record
    assert warnings == ["groundtrace: the broken_hub model 'tiny/broken' failed 5 times in a row (RuntimeError): its "
                        "records get an error Score at once for 30 s, then one call tries it again (circuit breaker)"]


ORPHANED = textwrap.dedent("""
    import os, signal, time
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    monitor = Monitor(["lexical", "facts"], "none")  # scored in a scoring process of its own (the default)
    for i in range(200):
        monitor.submit(Record(id=str(i), question="q?", contexts=["Entry costs 12 euros. " * 50],
                              answer="Entry costs 12 euros. " * 20))
    time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGKILL)  # the application vanishes with records in its scoring process
""")


def test_a_scoring_process_whose_application_was_killed_ends_without_a_traceback(tmp_path):
    """Issue 54 (smaller): the scoring child of a vanished application has nowhere to write: it ends quietly.
    The captured stderr closes only when the child has ended too, so this also shows that it ends."""
    script = tmp_path / "app.py"
    script.write_text(ORPHANED, encoding="utf-8")
    ended = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert ended.returncode == -signal.SIGKILL
    assert "Traceback" not in ended.stderr and "BrokenPipe" not in ended.stderr, ended.stderr
