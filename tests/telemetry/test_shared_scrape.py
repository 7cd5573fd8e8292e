"""The processes that name one Prometheus port share its scrape (groundtrace.telemetry.scrape): real processes on
127.0.0.1, each with a Monitor built from arguments and GROUNDTRACE_TELEMETRY. The second process to come joins
instead of failing, and the scrape is the sum; it passes promtool's lint; when the serving process closes, the
other serves, its counts kept; a child forked with the Monitor built is counted once (the parent's histograms
are not counted again); a new run on a port starts from zero; PROMETHEUS_MULTIPROC_DIR is used, and kept; a lone
process serves its own registry as before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from groundtrace.telemetry.multiprocess import base_dir
from tests.phoenix_server import free_port
from tests.prometheus_server import PROMTOOL, needs_prometheus

MEMBER = Path(__file__).resolve().parent / "scrape_member.py"


class Member:
    def __init__(self, process: subprocess.Popen, pid: int, serving: bool, child: int | None) -> None:
        self.process, self.pid, self.serving, self.child = process, pid, serving, child

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


@contextmanager
def member(port: int, records: int, child_records: int | None = None, **env: str) -> Iterator[Member]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDTRACE_", "PROMETHEUS_MULTIPROC"))}
    environ.update(GROUNDTRACE_TELEMETRY=f"prometheus:127.0.0.1:{port}", GROUNDTRACE_SINKS="none", **env)
    args = [str(records)] + ([] if child_records is None else [str(child_records)])
    process = subprocess.Popen([sys.executable, str(MEMBER), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=environ)
    try:
        child = None
        line = process.stdout.readline() if process.stdout else ""
        if line.startswith("child "):
            child = int(line.split()[1])
            line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("ready "), f"the process did not start: {line!r}"
        _, pid, serving = line.split()
        found = Member(process, int(pid), serving == "1", child)
        yield found
    finally:
        if process.poll() is None:
            try:
                Member(process, 0, False, None).close()
            except subprocess.TimeoutExpired:
                process.kill()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def samples(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(scrape(port)):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def total(port: int, name: str) -> float:
    return sum(value for _, value in samples(port).get(name, []))


def worker_pids(port: int) -> set[int]:
    return {int(labels["pid"]) for labels, _ in samples(port).get("groundtrace_monitor_workers", [])}


def until(condition, what: str, limit_s: float = 30.0):  # noqa: ANN001 - a test's lambda
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            found = condition()
        except OSError:  # between a serving process's end and the next one listening
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"after {limit_s:g} s: {what}")


def test_the_second_process_joins_and_the_scrape_is_the_sum_until_the_server_is_gone() -> None:
    port = free_port()
    with ExitStack() as stack:
        first = stack.enter_context(member(port, 3))
        second = stack.enter_context(member(port, 5))
        assert (first.serving, second.serving) == (True, False)  # joined, not failed
        until(lambda: total(port, "groundtrace_monitor_submitted_total") == 8, "3 + 5 submitted on one scrape")
        assert total(port, "groundtrace_evaluations_total") == 8
        assert worker_pids(port) == {first.pid, second.pid}  # a gauge per process
        assert len(samples(port)["target_info"]) == 1  # the service described once
        first.close()  # the serving process ends: the other listens in its place, the first's counts kept
        until(lambda: worker_pids(port) == {second.pid}, "the second serves, the first's gauges gone")
        assert total(port, "groundtrace_monitor_submitted_total") == 8
        assert total(port, "groundtrace_evaluation_score_count") == 8


@needs_prometheus
def test_promtool_accepts_the_scrape_of_two_processes() -> None:
    port = free_port()
    with member(port, 2), member(port, 1):
        until(lambda: total(port, "groundtrace_monitor_submitted_total") == 3, "both processes on the scrape")
        exposition = scrape(port)
    done = subprocess.run([str(PROMTOOL), "check", "metrics"], input=exposition, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr
    assert "groundtrace_monitor_scoring_duration_seconds_bucket{" in exposition


def test_a_child_forked_with_the_monitor_built_is_counted_once() -> None:
    """The parent scored 2 before forking, the child 3: the child's histograms hold the parent's 2 as well
    (the SDK's state is copied), and the scrape counts them once."""
    port = free_port()
    with member(port, 2, child_records=3) as parent:
        until(lambda: total(port, "groundtrace_monitor_submitted_total") == 5, "the parent's 2 and the child's 3")
        assert total(port, "groundtrace_evaluation_score_count") == 5
        assert total(port, "groundtrace_monitor_scoring_duration_seconds_count") == 5
        until(lambda: worker_pids(port) == {parent.pid, parent.child}, "the parent's gauges and the child's")


def test_a_new_run_on_the_port_starts_from_zero() -> None:
    """Two processes killed (no close, nothing cleaned): the next process to open the port is a new run, and
    the dead ones' counts are not added to its own."""
    port = free_port()
    with member(port, 3) as first, member(port, 4) as second:
        until(lambda: total(port, "groundtrace_monitor_submitted_total") == 7, "both on the scrape")
        time.sleep(1.5)  # past a write of each
        for one in (first, second):
            os.kill(one.pid, signal.SIGKILL)
            one.process.wait(timeout=30)
    with member(port, 2) as third:
        assert third.serving
        assert total(port, "groundtrace_monitor_submitted_total") == 2
        assert "pid" not in samples(port)["groundtrace_monitor_workers"][0][0]  # a lone process: its own registry
    assert not (base_dir() / f"{os.getpgid(0)}-{port}").exists()  # the last to close removes the directory


def test_prometheus_multiproc_dir_is_the_shared_directory_and_is_kept(tmp_path: Path) -> None:
    shared = tmp_path / "multiproc"
    port = free_port()
    with member(port, 2, PROMETHEUS_MULTIPROC_DIR=str(shared)) as only:
        assert only.serving
        until(lambda: total(port, "groundtrace_monitor_submitted_total") == 2, "the records on the scrape")
        assert worker_pids(port) == {only.pid}  # in multiprocess mode from the first process
        assert (shared / f"counter_{only.pid}.db").exists()
    assert (shared / f"counter_{only.pid}.db").exists()  # yours to empty before a start, as prometheus_client says
