"""The Monitor: never blocks or raises on submit, and every record ends in exactly one bucket."""

import logging
import threading
import time

import pytest

from groundtrace import Record, Score
from groundtrace.metrics import Metric, Result
from groundtrace.monitor import Monitor, sampled
from groundtrace.sinks import Sink


class Collect(Sink):
    name = "collect"

    def __init__(self):
        self.rows = []
        self.lock = threading.Lock()

    def emit(self, record, scores):
        with self.lock:
            self.rows.append((record, scores))


class Fixed(Metric):
    name = "fixed"
    higher_is_better = True
    default_threshold = 0.5

    def compute(self, record, language):
        return Result(0.75, "fine")


class Raises(Fixed):
    name = "raises"

    def compute(self, record, language):
        raise ValueError("boom")


class Hangs(Fixed):
    name = "hangs"

    def __init__(self, release: threading.Event, **kw):
        super().__init__(**kw)
        self.release = release

    def compute(self, record, language):
        self.release.wait(30)
        return Result(0.5, "late")


class Garbage(Fixed):
    name = "garbage"

    def compute(self, record, language):
        return Result("not a number", "junk")  # type: ignore[arg-type]


class Gate(Fixed):
    """Blocks workers until released, to fill the queue deterministically."""

    name = "gate"

    def __init__(self, gate: threading.Event, **kw):
        super().__init__(**kw)
        self.gate = gate

    def compute(self, record, language):
        self.gate.wait(30)
        return Result(1.0, "ok")


def record(i: int, **kw) -> Record:
    return Record(id=str(i), contexts=["The fee is 100 rubles."], answer="The fee is 100 rubles.", **kw)


def test_scores_reach_the_sinks_and_stats_add_up():
    sink = Collect()
    with Monitor([Fixed()], [sink], flush_at_exit=False) as monitor:
        for i in range(20):
            assert monitor.submit(record(i)) is True
        assert monitor.flush(10)
        stats = monitor.stats
    assert stats.submitted == 20 and stats.scored == 20 and stats.failed == 0 and stats.settled == 20
    assert sorted(int(r.id) for r, _ in sink.rows) == list(range(20))
    assert all(s[0].value == 0.75 for _, s in sink.rows)
    assert stats.latency_ms_p50 is not None


def test_sampling_is_deterministic_by_trace_id():
    assert sampled("abc", 1.0) and not sampled("abc", 0.0)
    keys = [f"{i:032x}" for i in range(2000)]
    share = sum(sampled(k, 0.25) for k in keys) / len(keys)
    assert 0.21 < share < 0.29
    assert [sampled(k, 0.25) for k in keys] == [sampled(k, 0.25) for k in keys]
    sink = Collect()
    with Monitor([Fixed()], [sink], sample_rate=0.5, flush_at_exit=False) as monitor:
        # two records of one trace are scored together or not at all
        for i in range(200):
            trace = f"{i:032x}"
            monitor.submit(record(2 * i, trace_id=trace))
            monitor.submit(record(2 * i + 1, trace_id=trace))
        monitor.flush(10)
        stats = monitor.stats
    traces = [r.trace_id for r, _ in sink.rows]
    assert all(traces.count(t) == 2 for t in traces)
    assert stats.sampled_out + stats.scored == 400 and stats.sampled_out > 0


def test_exclusion_flag_in_metadata():
    sink = Collect()
    with Monitor([Fixed()], [sink], flush_at_exit=False) as monitor:
        monitor.submit(record(1, metadata={"groundtrace_exclude": True}))
        monitor.submit(record(2))
        monitor.flush(10)
        assert monitor.stats.excluded == 1 and monitor.stats.scored == 1
    assert [r.id for r, _ in sink.rows] == ["2"]


def test_a_full_queue_drops_and_counts_without_blocking():
    gate = threading.Event()
    sink = Collect()
    monitor = Monitor([Gate(gate)], [sink], queue_size=5, workers=1, flush_at_exit=False)
    try:
        started = time.perf_counter()
        accepted = [monitor.submit(record(i)) for i in range(100)]
        # 100 submits against a stuck worker return while it is stuck (a put that waited even 0.05 s each: 5 s)
        assert not gate.is_set() and time.perf_counter() - started < 5.0
        # one record is with the worker, five wait in the queue, the rest are dropped
        assert sum(accepted) in (5, 6)
        assert monitor.stats.dropped == 100 - sum(accepted)
    finally:
        gate.set()
        monitor.flush(10)
        monitor.close()
    stats = monitor.stats
    assert stats.scored == sum(accepted) and stats.settled == stats.submitted == 100


def test_the_drop_warning_names_the_bound_that_dropped(caplog):
    """Records of 40,000 characters against a 100,000-byte bound: the bytes drop them while the count bound (1000) is
    far away, and the warning says so (before: "the queue was full (1000 records)")."""
    gate = threading.Event()
    big = Record(id="big", question="q?", contexts=["c" * 20_000], answer="a" * 20_000)
    monitor = Monitor([Gate(gate)], [], queue_size=1000, queue_bytes=100_000, workers=1, flush_at_exit=False)
    try:
        with caplog.at_level(logging.WARNING, logger="groundtrace"):
            for i in range(8):  # the first ones sit unsized (the queue sizes records once it holds 8)
                monitor.submit(record(i))
            accepted = [monitor.submit(big.model_copy(update={"id": f"big{i}"})) for i in range(6)]
            monitor._say_losses()
        assert accepted.count(False) >= 3 and monitor.stats.dropped == accepted.count(False)
        [said] = [r.getMessage() for r in caplog.records if "not scored" in r.getMessage()]
        assert said.startswith(f"groundtrace: records dropped: {accepted.count(False)} not scored: the records "
                               "waiting held 0.0953674 MiB of text, the queue's bound (queue_bytes)")
        assert "queue was full" not in said
    finally:
        gate.set()
        monitor.close()


def test_raising_hanging_and_garbage_metrics_become_error_scores():
    release = threading.Event()
    sink = Collect()
    monitor = Monitor([Raises(), Hangs(release), Garbage(), Fixed()], [sink], metric_timeout_s=0.3, flush_at_exit=False)
    try:
        monitor.submit(record(1))
        assert monitor.flush(10)
        (rec, scores), = sink.rows
        by_name = {s.metric: s for s in scores}
        assert by_name["raises"].error == "ValueError: boom"
        assert "timed out after 0.3 s" in by_name["hangs"].error
        assert "invalid value" in by_name["garbage"].error
        assert by_name["fixed"].value == 0.75
        assert monitor.stats.failed == 1 and monitor.stats.scored == 0
    finally:
        release.set()
        monitor.close()


def test_a_failing_or_slow_sink_is_counted_and_does_not_stop_the_others():
    class Broken(Sink):
        name = "broken"

        def emit(self, record, scores):
            raise ConnectionError("server down")

    release = threading.Event()

    class Slow(Collect):
        def emit(self, record, scores):
            release.wait(10)
            super().emit(record, scores)

    good, slow = Collect(), Slow()
    with Monitor([Fixed()], [Broken(), slow, good], flush_at_exit=False) as monitor:
        for i in range(10):
            monitor.submit(record(i))
        assert slow.rows == []  # the app's submits returned while the slow sink held its first record
        release.set()
        monitor.flush(10)
        assert monitor.stats.sink_errors == 10
    assert len(good.rows) == 10 and len(slow.rows) == 10


def test_submit_never_raises_even_on_junk_and_after_close():
    monitor = Monitor([Fixed()], [], flush_at_exit=False)
    assert monitor.submit(None) is False  # type: ignore[arg-type]
    monitor.close()
    monitor.close()  # twice is fine
    assert monitor.submit(record(1)) is False
    stats = monitor.stats
    assert stats.submitted == 2 and stats.dropped == 2


def submit_from_eight_threads(monitor, make, each=1250):
    """8 threads, started together, each submitting ``each`` records ``make(i)`` (i unique across threads)."""
    barrier = threading.Barrier(8)

    def produce(offset):
        barrier.wait()
        for i in range(each):
            monitor.submit(make(offset + i))

    threads = [threading.Thread(target=produce, args=(k * each,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_ten_thousand_submissions_over_eight_threads_all_settle():
    sink = Collect()
    monitor = Monitor(["lexical"], [sink], queue_size=20_000, workers=2, flush_at_exit=False)
    submit_from_eight_threads(monitor, lambda i: record(i, trace_id=f"{i:032x}"))
    assert monitor.flush(120)
    monitor.close()
    stats = monitor.stats
    assert stats.submitted == 10_000
    assert stats.settled == 10_000 and stats.scored + stats.dropped == 10_000
    assert len(sink.rows) == stats.scored
    assert all(isinstance(s, Score) and s.ok for _, scores in sink.rows for s in scores)


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="sample_rate"):
        Monitor([Fixed()], sample_rate=1.5)


def test_closing_before_the_queue_drains_counts_the_rest_as_dropped():
    gate = threading.Event()
    # batch_size=1: the worker holds one record, the other 29 wait in the queue
    monitor = Monitor([Gate(gate)], [], queue_size=50, batch_size=1, flush_at_exit=False)
    for i in range(30):
        monitor.submit(record(i))
    threading.Timer(0.5, gate.set).start()
    monitor.close(timeout=0.1)
    gate.set()
    time.sleep(0.6)
    stats = monitor.stats
    assert stats.submitted == 30 and stats.settled == 30
    assert stats.dropped >= 28 and stats.scored + stats.dropped == 30
