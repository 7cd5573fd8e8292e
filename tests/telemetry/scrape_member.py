"""One process of a server, for test_shared_scrape.py: a Monitor built from arguments (its metrics go where
GROUNDTRACE_TELEMETRY says), RECORDS records submitted and settled, then, with a third argument, a child forked
with the Monitor built that submits that many more. Prints ``ready PID SERVING`` (and ``child PID`` first when
it forked), then holds until stdin closes, and closes its Monitor.

    python scrape_member.py RECORDS [CHILD_RECORDS]
"""

from __future__ import annotations

import os
import sys

from groundtrace.monitor import Monitor
from groundtrace.record import Record

PLANTED = Record(question="What is the capital of France?", contexts=["Paris is the capital of France."],
                 answer="Paris is the capital of Germany; Napoleon founded it in 1850.")


def submit(monitor: Monitor, count: int) -> None:
    for _ in range(count):
        monitor.submit(PLANTED)
    assert monitor.flush(60)


monitor = Monitor(["lexical"], "none", isolation="thread")
submit(monitor, int(sys.argv[1]))
if len(sys.argv) > 2:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its own records, summed into the parent's endpoint
        submit(monitor, int(sys.argv[2]))
        os.write(write, b"1")
        os.read(0, 1)  # until the test closes stdin
        monitor.close()
        os._exit(0)
    os.read(read, 1)
    print(f"child {child}", flush=True)
endpoint = monitor.telemetry.endpoint
print(f"ready {os.getpid()} {int(endpoint.server is not None)}", flush=True)
sys.stdin.read()
monitor.close()
