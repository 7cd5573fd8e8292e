"""Nothing groundtrace runs can hang the application: a sink whose close() waits on a lock its stuck emit() holds
(a common client pattern), and a jsonl sink pointed at a FIFO nobody reads. The process exits, the constructor
returns, and every loss is counted and said. Real processes and a real FIFO."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.sinks.jsonl import JsonlSink

RECORD = dict(question="When does the museum open?", contexts=["The museum opens at 9 am."], answer="At 9 am.")

STUCK_CLIENT = textwrap.dedent("""
    import threading, time
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    class StuckClient:
        '''emit() holds the client's lock and waits for a server that never answers; close() takes the lock.'''
        name = "stuck"

        def __init__(self):
            self.lock = threading.Lock()

        def emit(self, record, scores):
            with self.lock:
                threading.Event().wait()

        def close(self):
            with self.lock:
                pass

    monitor = Monitor(["lexical"], [StuckClient()], isolation="thread")
    monitor.submit(Record(id="r1", question="q?", contexts=["The museum opens at 9 am."], answer="At 9 am."))
    print("the app is done", flush=True)
""")


def test_a_sink_whose_close_waits_on_its_stuck_emit_does_not_hold_the_process_at_exit(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(STUCK_CLIENT, encoding="utf-8")
    env = {**os.environ, "GROUNDTRACE_EXIT_FLUSH_S": "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    # before: killed after 30 s, never exiting. The bound here only detects a hang: settle 2 s, close 10 s
    ended = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert ended.returncode == 0 and "the app is done" in ended.stdout
    # the emit that never returned is counted and said as lost, not left uncounted
    assert ("sink stuck: 1 record(s) not delivered when the Monitor closed (it is behind; one emit() was still "
            "running): counted in sink_errors") in ended.stderr, ended.stderr


def test_close_sinks_leaves_a_close_that_never_returns_behind_and_says_so():
    from groundtrace.sinks import close_sinks

    class NeverCloses:
        name = "never"

        def close(self):
            threading.Event().wait()

    class Closes:
        name = "fine"
        closed = False

        def close(self):
            Closes.closed = True

    assert close_sinks([NeverCloses(), Closes()], timeout_s=0.5) == [
        "closing sink never did not return within 0.5 s: left behind"]
    assert Closes.closed


def test_a_jsonl_sink_on_a_fifo_nobody_reads_never_blocks_the_app_and_each_record_is_a_counted_error(tmp_path, caplog):
    fifo = tmp_path / "scores.fifo"
    os.mkfifo(fifo)
    built: list[Monitor] = []
    constructor = threading.Thread(target=lambda: built.append(
        Monitor(["lexical"], [JsonlSink(fifo)], isolation="thread", flush_at_exit=False)), daemon=True)
    constructor.start()
    constructor.join(30)  # before: blocked forever in open(); the bound only detects that
    assert not constructor.is_alive() and built
    [monitor] = built
    try:
        for i in range(3):
            assert monitor.submit(Record(id=f"r{i}", **RECORD))
        assert monitor.flush(60)
        assert (monitor.stats.scored, monitor.stats.sink_errors) == (3, 3)
    finally:
        monitor.close()
    assert "is a FIFO that no process reads" in caplog.text


def test_a_fifo_with_a_reader_gets_whole_lines(tmp_path):
    fifo = tmp_path / "scores.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader_opened = threading.Event()

    def read() -> None:
        with open(fifo, "rb") as pipe:  # blocks until the sink opens it for writing
            reader_opened.set()
            received.append(pipe.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sink = JsonlSink(fifo)
    with Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        for i in range(3):
            monitor.submit(Record(id=f"r{i}", **RECORD))
        # the sink opens the FIFO at its first record, with the reader waiting: it may take a retry
        assert monitor.flush(60)
    reader.join(30)
    lines = received[0].decode().splitlines() if received else []
    assert len(lines) + monitor.stats.sink_errors == 3 and lines


READ_ONLY_APP = textwrap.dedent("""
    import sys
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    monitor = Monitor(["lexical"], [f"jsonl:{sys.argv[1]}/scores.jsonl"])  # isolation "process": the sink is the child's
    for i in range(60):
        monitor.submit(Record(id=f"r{i}", question="q?", contexts=["The museum opens at 9 am."], answer="At 9 am."))
    assert monitor.flush(120)
    print("sink_errors", monitor.stats.sink_errors, flush=True)
    monitor.close()
""")


def test_the_scoring_process_says_every_loss_on_a_read_only_mount_before_it_stops(tmp_path):
    """60 records, a jsonl sink on a read-only tmpfs, the default scoring process: the first failure with its cause,
    then the rest as one count when the child closes its sinks (before: only the first was ever said)."""
    import re

    mount = tmp_path / "ro"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        import pytest

        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.decode().strip()}")
    try:
        script = tmp_path / "app.py"
        script.write_text(READ_ONLY_APP, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        ended = subprocess.run([sys.executable, str(script), str(mount)], capture_output=True, text=True, env=env,
                               timeout=300)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    assert ended.returncode == 0, ended.stderr
    assert "sink_errors 60" in ended.stdout
    first = re.findall(r"sink jsonl failed: record r\d+: OSError: \[Errno 30\] Read-only file system", ended.stderr)
    more = [int(n) for n in re.findall(r"sink jsonl failed: (\d+) more", ended.stderr)]
    assert len(first) == 1 and 1 + sum(more) == 60, ended.stderr


def test_at_exit_a_sink_that_makes_no_progress_is_not_waited_for_the_whole_exit_bound(tmp_path):
    """Issue 54, row 16: the default exit bound is 60 s; before, the process lived 60 s (and 10 s of close) after
    its main ended, though nothing progressed. The subprocess's own timeout only detects that."""
    script = tmp_path / "app.py"
    script.write_text(STUCK_CLIENT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GROUNDTRACE_EXIT_FLUSH_S"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    ended = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=45)
    assert ended.returncode == 0 and "the app is done" in ended.stdout
    assert "at exit: sink(s) stuck made no progress for 3 s" in ended.stderr, ended.stderr
    assert "sink stuck: 1 record(s) not delivered when the Monitor closed" in ended.stderr, ended.stderr


SLOW_BUT_MOVING = textwrap.dedent("""
    import sys, time
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    class Slow:
        '''Each emit takes a second: slower than the stall bound in all, never stalled in one.'''
        name = "slow"

        def emit(self, record, scores):
            time.sleep(1.0)
            with open(sys.argv[1], "a", encoding="utf-8") as out:
                out.write(record.id + "\\n")

    monitor = Monitor(["lexical"], [Slow()], isolation="thread")
    for i in range(6):
        monitor.submit(Record(id=f"r{i}", question="q?", contexts=["The museum opens at 9 am."], answer="At 9 am."))
""")


def test_at_exit_a_slow_sink_that_makes_progress_delivers_everything(tmp_path):
    script, out = tmp_path / "app.py", tmp_path / "delivered.txt"
    script.write_text(SLOW_BUT_MOVING, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GROUNDTRACE_EXIT_FLUSH_S"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    ended = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, env=env,
                           timeout=120)
    assert ended.returncode == 0, ended.stderr
    assert out.read_text(encoding="utf-8").split() == [f"r{i}" for i in range(6)], ended.stderr
    assert "made no progress" not in ended.stderr
