"""Inside an actor: metrics that wait on an endpoint score a batch concurrently, under a bound."""

from __future__ import annotations

import threading
import time

from groundtrace.scoring.engine import Evaluator
from groundtrace.metrics import Metric, Result
from groundtrace.ray.batch import score_items


class SlowEndpoint(Metric):
    """Stands in for a judge: 0.2 s of waiting per record, and counts how many wait at once."""

    name = "slow_endpoint"
    higher_is_better = True
    default_threshold = 0.5
    waits_on_io = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.lock = threading.Lock()
        self.now = self.most = 0

    def compute(self, record, language):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.2)
        with self.lock:
            self.now -= 1
        return Result(0.9, "fine")


def test_io_metrics_run_concurrently_under_the_bound_and_keep_the_metric_order():
    slow = SlowEndpoint()
    evaluator = Evaluator(["lexical", slow])
    items = [{"id": str(i), "contexts": ["The fee is 100 rubles."], "answer": "The fee is 100 rubles."}
             for i in range(16)]
    out = score_items(evaluator, items, [""] * 15 + ['["slow_endpoint"]'], io_concurrency=10)
    assert slow.most == 10  # the bound, reached and never passed (more than asyncio's default threads here)
    assert [s.metric for s in out[0].scores] == ["lexical", "slow_endpoint"]
    assert [s.metric for s in out[15].scores] == ["slow_endpoint"]
    assert all(s.ok for r in out for s in r.scores)
    assert [r.id for r in out] == [str(i) for i in range(16)]
