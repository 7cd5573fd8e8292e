"""Monitor(isolation="ray"): the Monitor's contract on a Ray cluster, and with no cluster at all."""

from __future__ import annotations

import threading

import pytest

from groundtrace.config import Settings
from groundtrace.monitor import Monitor
from groundtrace.ray.live import RayScorer
from groundtrace.record import Record
from tests.phoenix_server import free_port
from tests.test_monitor import Collect

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'groundtrace[ray]'")


def record(i: int) -> Record:
    return Record(id=str(i), question="What is the fee?", contexts=["The fee is 100 rubles."],
                  answer="The fee is 100 rubles." if i % 2 else "The fee is 900 rubles.")


@pytest.fixture
def ray_exchanges(monkeypatch) -> set[int]:
    """The threads that talked to the Ray child (started it, sent it a batch, waited for its answer)."""
    threads: set[int] = set()
    exchange = RayScorer._exchange

    def recorded(self, records, budget):
        threads.add(threading.get_ident())
        return exchange(self, records, budget)

    monkeypatch.setattr(RayScorer, "_exchange", recorded)
    return threads


def submit_from_threads(monitor: Monitor, total: int, threads: int = 8) -> tuple[list[bool], set[int]]:
    """Each submit's answer, and the application threads that submitted."""
    results: list[bool] = []
    lock = threading.Lock()
    idents: set[int] = set()

    def run(start: int) -> None:
        with lock:
            idents.add(threading.get_ident())
        for i in range(start, total, threads):
            accepted = monitor.submit(record(i))  # must neither raise nor block
            with lock:
                results.append(accepted)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results, idents


def test_ten_thousand_submits_from_eight_threads_all_settle(cluster, ray_exchanges):
    address = cluster.get_runtime_context().gcs_address
    sink = Collect()
    monitor = Monitor(["lexical"], [sink], isolation="ray", ray_address=address, workers=2, queue_size=10_000,
                      flush_at_exit=False)
    try:
        assert monitor.isolation == "ray"
        accepted, app_threads = submit_from_threads(monitor, 10_000)
        assert monitor.flush(180)
    finally:
        monitor.close()
    stats = monitor.stats
    print(f"\n10,000 submits from 8 threads: {stats.as_dict()}")
    assert stats.submitted == 10_000 == stats.settled
    assert stats.scored == sum(accepted) > 0 and stats.failed == 0
    assert stats.dropped == 10_000 - sum(accepted)
    # a submit never waits for Ray: only the Monitor's own workers start the Ray child and talk to it
    assert ray_exchanges and not ray_exchanges & app_threads
    assert len(sink.rows) == stats.scored  # the sinks ran here, once per scored record
    by_id = {r.id: s[0] for r, s in sink.rows}
    assert all(s.ok and s.metric == "lexical" for s in by_id.values())
    values = {int(i) % 2: s.value for i, s in by_id.items()}
    assert values[1] > values[0]  # the supported answer scores higher than the one with a new number


def test_settings_with_a_ray_address_choose_ray_isolation():
    settings = Settings.from_env({"GROUNDTRACE_RAY_ADDRESS": "127.0.0.1:1", "GROUNDTRACE_METRICS": "lexical"})
    assert settings.ray_address == "127.0.0.1:1"
    with Monitor.from_settings(settings, flush_at_exit=False) as monitor:
        assert monitor.isolation == "ray"
    with Monitor.from_settings(settings, isolation="thread", flush_at_exit=False) as monitor:
        assert monitor.isolation == "thread"


def test_no_cluster_counts_failures_and_the_application_sees_nothing(ray_exchanges):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    sink = Collect()
    monitor = Monitor(["lexical"], [sink], isolation="ray", ray_address=address, workers=1, flush_at_exit=False)
    try:
        accepted, app_threads = submit_from_threads(monitor, 400, threads=4)
        assert monitor.flush(60)
    finally:
        monitor.close()
    stats = monitor.stats
    # a submit never waits for Ray: only the Monitor's own workers start the Ray child and talk to it
    assert ray_exchanges and not ray_exchanges & app_threads
    assert stats.submitted == 400 == stats.settled
    assert stats.failed == sum(accepted) > 0 and stats.scored == 0
    assert all(not s.ok and "Ray" in s.error for _, scores in sink.rows for s in scores)


def test_a_cluster_that_stops_fails_the_batches_and_nothing_else(cluster, ray_exchanges):
    """Last in this module: it stops the module's cluster."""
    address = cluster.get_runtime_context().gcs_address
    sink = Collect()
    monitor = Monitor(["lexical"], [sink], isolation="ray", ray_address=address, workers=1, metric_timeout_s=1.0,
                      flush_at_exit=False)
    try:
        for i in range(50):
            monitor.submit(record(i))
        assert monitor.flush(120)
        assert monitor.stats.scored == 50
        cluster.shutdown()
        accepted, app_threads = submit_from_threads(monitor, 200, threads=4)
        assert monitor.flush(180)
    finally:
        monitor.close()
    stats = monitor.stats
    # a submit never waits for Ray: only the Monitor's own workers start the Ray child and talk to it
    assert ray_exchanges and not ray_exchanges & app_threads
    assert stats.submitted == 250 == stats.settled
    assert stats.scored == 50 and stats.failed == sum(accepted) > 0
