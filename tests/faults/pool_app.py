"""An application module whose Monitor is built when it is imported, as a pool's worker imports it (issue 54, row 1:
tests/faults/test_faults_pools.py)."""

from __future__ import annotations

import os

from groundtrace import Record
from groundtrace.monitor import Monitor

monitor = Monitor(["lexical"], sinks=[f"jsonl:{os.environ['POOL_APP_OUT']}"])


def answer(i: int) -> int:
    monitor.submit(Record(id=f"r{i}", question="What does entry cost?", contexts=["Entry costs 12 euros."],
                          answer="Entry costs 12 euros."))
    return os.getpid()
