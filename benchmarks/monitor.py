"""Monitor.submit throughput and behaviour under overload.

    python benchmarks/monitor.py

1. Throughput: 100,000 submits from one thread into a Monitor scoring with `lexical` (a queue big
   enough that nothing is dropped): submits/s and the p50 / p99 / max cost of one submit.
2. Overload: the same submits against a queue of 100 whose worker is far slower than the
   producer: how many are dropped (and counted), and what one submit costs while dropping.
"""

from __future__ import annotations

import statistics
import time

from groundtrace import Record
from groundtrace.monitor import Monitor

N = 100_000


def records(n: int) -> list[Record]:
    return [Record(id=str(i), trace_id=f"{i:032x}", contexts=["The fee is 100 rubles per month."],
                   answer="The fee is 100 rubles.") for i in range(n)]


def measure(monitor: Monitor, items: list[Record]) -> tuple[float, list[float]]:
    costs = []
    started = time.perf_counter()
    for record in items:
        t = time.perf_counter_ns()
        monitor.submit(record)
        costs.append((time.perf_counter_ns() - t) / 1000.0)
    return len(items) / (time.perf_counter() - started), costs


def describe(costs: list[float]) -> str:
    q = statistics.quantiles(costs, n=100)
    return f"p50 {q[49]:.1f} µs, p99 {q[98]:.1f} µs, max {max(costs):.0f} µs"


def main() -> None:
    items = records(N)
    monitor = Monitor(["lexical"], [], queue_size=N, workers=1, flush_at_exit=False)
    rate, costs = measure(monitor, items)
    print(f"throughput: {rate:,.0f} submits/s over {N:,} submits ({describe(costs)})")
    monitor.close(timeout=0)
    s = monitor.stats
    print(f"  closed at once: {s.settled:,} of {s.submitted:,} settled (scored {s.scored:,}, failed {s.failed:,}, "
          f"dropped {s.dropped:,} while still queued, in a worker's hands {s.queued:,})")

    monitor = Monitor(["lexical", "facts"], [], queue_size=100, workers=1, flush_at_exit=False)
    rate, costs = measure(monitor, items)
    s = monitor.stats
    print(f"overload: {rate:,.0f} submits/s, {s.dropped:,} of {s.submitted:,} dropped and counted ({describe(costs)})")
    monitor.close(timeout=0)


if __name__ == "__main__":
    main()
