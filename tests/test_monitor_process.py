"""Process isolation: metrics run in a child process that a hang or a crash cannot take down."""

import os

import pytest

from groundtrace import Record
from groundtrace.monitor import Monitor
from tests.test_monitor import Collect

PLUGIN = '''
import os, time
from groundtrace.metrics import Metric, Result

class WhereAmI(Metric):
    name = "where_am_i"
    higher_is_better = True
    default_threshold = 0.5
    def compute(self, record, language):
        return Result(1.0, "ok", details={"pid": os.getpid()})

class HangsOnHang(WhereAmI):
    name = "hangs_on_hang"
    def compute(self, record, language):
        if record.answer == "hang":
            time.sleep(60)
        return Result(1.0, "ok", details={"pid": os.getpid()})

class DiesOnDie(WhereAmI):
    name = "dies_on_die"
    def compute(self, record, language):
        if record.answer == "die":
            os._exit(3)
        return Result(1.0, "ok", details={"pid": os.getpid()})
'''


@pytest.fixture
def plugin_metrics(tmp_path, monkeypatch):
    """Metrics registered through the groundtrace.metrics entry point, so the child finds them too."""
    (tmp_path / "probe_metrics.py").write_text(PLUGIN)
    info = tmp_path / "probe_metrics-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-metrics\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[groundtrace.metrics]\nwhere_am_i = probe_metrics:WhereAmI\nhangs_on_hang = probe_metrics:HangsOnHang\n"
        "dies_on_die = probe_metrics:DiesOnDie\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    yield


def rec(i, answer="fine"):
    return Record(id=str(i), contexts=["context"], answer=answer)


def test_metrics_by_name_run_in_a_child_process(plugin_metrics):
    sink = Collect()
    with Monitor(["where_am_i", "lexical"], [sink], flush_at_exit=False) as monitor:
        assert monitor.isolation == "process"
        for i in range(5):
            monitor.submit(rec(i))
        assert monitor.flush(60)
    pids = {scores[0].details["pid"] for _, scores in sink.rows}
    assert len(sink.rows) == 5 and len(pids) == 1 and os.getpid() not in pids
    assert all(scores[1].metric == "lexical" and scores[1].ok for _, scores in sink.rows)


def test_a_hung_metric_is_killed_with_its_process_and_the_next_record_is_scored(plugin_metrics):
    sink = Collect()
    with Monitor(["hangs_on_hang", "where_am_i"], [sink], metric_timeout_s=2, flush_at_exit=False) as monitor:
        monitor.submit(rec(1, "hang"))
        monitor.submit(rec(2))
        assert monitor.flush(60)
        stats = monitor.stats
    (r1, hung), (r2, fine) = sorted(sink.rows, key=lambda row: row[0].id)
    # the record's budget is metric_timeout_s per metric: 2 metrics x 2 s
    assert hung[0].error == hung[1].error == "timed out after 4 s (metric_timeout_s per metric)"
    assert [s.ok for s in fine] == [True, True]
    assert stats.failed == 1 and stats.scored == 1


def test_a_crashing_metric_costs_one_record_not_the_monitor(plugin_metrics):
    sink = Collect()
    with Monitor(["dies_on_die"], [sink], metric_timeout_s=10, flush_at_exit=False) as monitor:
        for i, answer in enumerate(["fine", "die", "fine"]):
            monitor.submit(rec(i, answer))
        assert monitor.flush(60)
    by_id = {r.id: scores[0] for r, scores in sink.rows}
    assert by_id["1"].error == "the scoring process died"
    assert by_id["0"].ok and by_id["2"].ok
    assert by_id["0"].details["pid"] != by_id["2"].details["pid"]  # restarted


def test_metric_instances_stay_in_process_and_explicit_process_needs_names():
    from tests.test_monitor import Fixed

    with Monitor([Fixed()], [], flush_at_exit=False) as monitor:
        assert monitor.isolation == "thread"
    with pytest.raises(ValueError, match="by name"):
        Monitor([Fixed()], [], isolation="process", flush_at_exit=False)
    with Monitor(["lexical"], [], isolation="thread", flush_at_exit=False) as monitor:
        assert monitor.isolation == "thread"


def test_a_sigterm_to_the_whole_process_group_leaves_the_scoring_process_to_its_application(plugin_metrics):
    """systemd's default stop (and `kill -TERM -PGID`) signals every process of the group: the scoring process
    leaves the ending to its application, which still has records to score, and goes on scoring them."""
    import signal

    sink = Collect()
    with Monitor(["where_am_i"], [sink], flush_at_exit=False) as monitor:
        monitor.submit(rec(0))
        assert monitor.flush(60)
        [child] = {scores[0].details["pid"] for _, scores in sink.rows}
        os.kill(child, signal.SIGTERM)  # what the group's SIGTERM brings it
        for i in range(1, 4):
            monitor.submit(rec(i))
        assert monitor.flush(60)
    assert [scores[0].error for _, scores in sink.rows] == [None] * 4
    assert {scores[0].details["pid"] for _, scores in sink.rows} == {child}  # the same process, not a restarted one
