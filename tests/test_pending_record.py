"""A PendingRecord: what an integration hands the Monitor at a request's end, built into a Record by
the Monitor's worker, and only when the Monitor keeps it."""

import threading

from test_monitor import Collect, Fixed

from groundtrace import Record
from groundtrace.monitor import Monitor
from groundtrace.record import InvalidInput, PendingRecord, realize

CONTEXT = "The dormitory fee is 1,879 rubles per month."


class Capture(PendingRecord):
    """A pending record that says which thread built it, and how often."""

    __slots__ = ("built_on", "fails")

    def __init__(self, key: str, *, excluded: bool = False, fails: bool = False):
        super().__init__(id=key, run_id=key, excluded=excluded)
        self.built_on: list[int] = []
        self.fails = fails

    def build(self) -> Record:
        self.built_on.append(threading.get_ident())
        if self.fails:
            raise KeyError("a bug of the integration's")
        return Record(id=self.id, run_id=self.run_id, question="How much is the dormitory?", contexts=[CONTEXT],
                      answer="It costs 1,879 rubles a month.")


def test_a_kept_record_is_built_by_the_worker_and_scored():
    sink = Collect()
    pending = Capture("run-1")
    with Monitor([Fixed()], [sink], flush_at_exit=False) as monitor:
        assert monitor.submit(pending) is True
        assert monitor.flush(10)
        stats = monitor.stats
    assert pending.built_on and pending.built_on != [threading.get_ident()]  # not on the caller's thread
    assert len(pending.built_on) == 1
    [(record, scores)] = sink.rows
    assert type(record) is Record and record.id == "run-1" and record.contexts == [CONTEXT]
    assert [s.value for s in scores] == [0.75]
    assert (stats.submitted, stats.scored, stats.failed) == (1, 1, 0)


def test_a_record_sampled_out_or_excluded_is_never_built():
    kept, sampled_out, excluded = Capture("kept"), Capture("sampled"), Capture("excluded", excluded=True)
    with Monitor([Fixed()], [Collect()], flush_at_exit=False) as monitor:
        monitor.submit(sampled_out, sample_rate=0.0)  # the handler's own rate
        monitor.submit(excluded)
        monitor.submit(kept)
        assert monitor.flush(10)
        stats = monitor.stats
    assert sampled_out.built_on == [] and excluded.built_on == [] and len(kept.built_on) == 1
    assert (stats.submitted, stats.sampled_out, stats.excluded, stats.scored) == (3, 1, 1, 1)
    assert stats.settled == stats.submitted


def test_a_build_that_fails_is_a_failed_record_with_error_scores_not_an_exception():
    sink = Collect()
    with Monitor([Fixed()], [sink], flush_at_exit=False) as monitor:
        assert monitor.submit(Capture("broken", fails=True)) is True
        monitor.submit(Capture("fine"))
        assert monitor.flush(10)
        stats = monitor.stats
    assert (stats.submitted, stats.failed, stats.scored) == (2, 1, 1)
    rows = {record.id: scores for record, scores in sink.rows}
    [error] = rows["broken"]
    assert not error.ok and "failed to build the record (KeyError)" in error.error
    assert rows["fine"][0].value == 0.75


def test_realize_builds_a_pending_record_and_passes_a_record_through():
    record = Record(id="r", answer="a", contexts=["c"])
    assert realize(record) is record
    assert realize(Capture("p")).id == "p"
    failed = realize(Capture("q", fails=True))
    assert isinstance(failed, InvalidInput) and failed.id == "q"


def test_a_pending_record_reaches_a_scoring_process_as_the_record_it_builds():
    sink = Collect()
    with Monitor(["lexical"], [sink], isolation="process", flush_at_exit=False) as monitor:
        monitor.submit(Capture("child"))
        assert monitor.flush(60)
        stats = monitor.stats
    [(record, scores)] = sink.rows
    assert record.id == "child" and scores[0].metric == "lexical" and scores[0].ok
    assert stats.scored == 1
