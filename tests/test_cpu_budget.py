"""The CPU budget: the accounting by hand on a fake clock, the configuration, and one real Monitor that
sheds records (counted over_budget) when its budget is tiny."""

from __future__ import annotations

import time

import pytest

from groundtrace import Record
from groundtrace.config import Settings
from groundtrace.monitor.cpu_budget import CpuBudget
from groundtrace.monitor import Monitor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_accrues_spends_and_pays_its_debt_by_hand() -> None:
    clock = Clock()
    budget = CpuBudget(0.25, burst_s=2.0, clock=clock)
    assert budget.capacity == 0.5 and budget.tokens() == 0.5  # a quarter core, two seconds' worth
    budget.spend(0.2)
    assert budget.tokens() == pytest.approx(0.3) and not budget.in_debt() and budget.wait_s() == 0.0
    budget.spend(0.5)  # 0.3 - 0.5 = -0.2: in debt for 0.2 / 0.25 = 0.8 s
    assert budget.tokens() == pytest.approx(-0.2) and budget.in_debt()
    assert budget.wait_s() == pytest.approx(0.8)
    clock.now += 0.5  # 0.5 s x 0.25 = 0.125 accrued: -0.075 left, 0.3 s to go
    assert budget.tokens() == pytest.approx(-0.075) and budget.in_debt()
    assert budget.wait_s() == pytest.approx(0.3)
    clock.now += 0.3
    assert not budget.in_debt() and budget.tokens() == pytest.approx(0.0, abs=1e-12)
    clock.now += 10.0  # never more than the burst: 10 s x 0.25 = 2.5, capped at 0.5
    assert budget.tokens() == pytest.approx(0.5)
    assert budget.spent == pytest.approx(0.7)


def test_spending_nothing_or_less_than_nothing_changes_nothing() -> None:
    clock = Clock()
    budget = CpuBudget(1.0, clock=clock)
    budget.spend(0.0)
    budget.spend(-3.0)
    assert budget.tokens() == 1.0 and budget.spent == 0.0 and not budget.in_debt()


def test_the_batch_holds_what_the_bucket_holds_at_the_estimated_cost() -> None:
    clock = Clock()
    budget = CpuBudget(0.5, burst_s=1.0, clock=clock)  # holds 0.5 CPU s
    assert budget.batch_limit(64) == 1  # no estimate yet: one record
    budget.note_records(4, 0.2)  # 0.05 s each
    assert budget.batch_limit(64) == 10  # 0.5 / 0.05
    assert budget.batch_limit(8) == 8
    budget.note_records(1, 0.15)  # 0.7 x 0.05 + 0.3 x 0.15 = 0.08
    assert budget.batch_limit(64) == 6  # int(0.5 / 0.08) = 6
    budget.spend(0.46)  # 0.04 left: less than one record's worth, still one
    assert budget.batch_limit(64) == 1
    budget.note_records(3, 0.0)  # 0.7 x 0.08 = 0.056 ... free records shrink the estimate, never divide by zero
    assert budget.batch_limit(64) == 1


@pytest.mark.parametrize("share", [0, -0.5, float("nan"), float("inf"), "half"])
def test_a_budget_that_is_no_share_of_a_core_is_refused(share) -> None:
    with pytest.raises(ValueError, match="share of one core"):
        CpuBudget(share)


def test_the_environment_sets_it_and_a_bad_value_is_refused() -> None:
    assert Settings.from_env({}).cpu_budget is None
    assert Settings.from_env({"GROUNDTRACE_CPU_BUDGET": " 0.25 "}).cpu_budget == 0.25
    for bad in ("0", "-1", "a quarter", "inf"):
        with pytest.raises(ValueError, match="GROUNDTRACE_CPU_BUDGET"):
            Settings.from_env({"GROUNDTRACE_CPU_BUDGET": bad})
    settings = Settings.from_env({"GROUNDTRACE_CPU_BUDGET": "0.5"})
    with Monitor.from_settings(settings, metrics=["lexical"], sinks=[], isolation="thread", flush_at_exit=False) as monitor:
        assert monitor.budget is not None and monitor.budget.share == 0.5
    with Monitor(["lexical"], [], isolation="thread", flush_at_exit=False) as monitor:
        assert monitor.budget is None


def test_a_tiny_budget_sheds_records_counts_them_and_holds_the_cpu_to_it() -> None:
    """A real scoring process: 600 records offered over about 3 s against a twentieth of a core.
    lexical costs about a millisecond of CPU per record here, so the budget cannot take them all."""
    share = 0.05
    monitor = Monitor(["lexical"], [], cpu_budget=share, isolation="process", flush_at_exit=False)
    try:
        monitor.submit(Record(id="warm", contexts=["The fee is 100 roubles."], answer="The fee is 100 roubles."))
        assert monitor.flush(60)
        started = time.monotonic()
        for i in range(600):
            monitor.submit(Record(id=str(i), trace_id=f"{i:032x}", contexts=["The fee is 100 roubles a month."] * 20,
                                  answer="The fee is 100 roubles a month, paid in advance. " * 10))
            time.sleep(0.005)
        assert monitor.flush(120)
        elapsed = time.monotonic() - started
    finally:
        monitor.close()
    stats = monitor.stats
    assert stats.submitted == 601 == stats.settled
    assert stats.over_budget > 0 and stats.scored > 0 and stats.dropped == stats.failed == 0  # measured: 324 and 277
    # what was used: at most the share of the time, plus one burst, plus the batch running when the debt began
    assert stats.cpu_s <= share * elapsed + monitor.budget.capacity + 0.1, stats  # measured: 0.28 s in 4.6 s


def test_the_backlog_it_admits_is_what_one_burst_pays_for() -> None:
    clock = Clock()
    budget = CpuBudget(0.1, burst_s=2.0, clock=clock)  # one burst: 0.2 CPU s
    assert budget.admits(63) and not budget.admits(64)  # no estimate yet: 64
    budget.note_records(10, 0.05)  # 5 ms each: 0.2 / 0.005 = 40 may wait
    assert budget.admits(39) and not budget.admits(40)
    budget.spend(0.3)  # in debt (0.2 - 0.3 = -0.1) for 1 s: nothing is admitted, however short the queue
    assert not budget.admits(0)
    clock.now += 1.0
    assert budget.admits(0)
