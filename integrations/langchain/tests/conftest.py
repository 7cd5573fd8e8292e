from __future__ import annotations

import os

# a Monitor given no sinks writes to the default store (groundtrace-scores.jsonl in the working
# directory) when none is configured: the tests say none, and those of the default store unset it
os.environ.setdefault("GROUNDTRACE_SINKS", "none")
# SDKs that report usage home (MLflow 3.x) are told not to: the suite reaches nothing beyond this machine
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import sys
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

# lc_app.py (the test application) sits beside this file; make it importable however pytest is run
sys.path.insert(0, str(Path(__file__).resolve().parent))

from groundtrace.monitor import Monitor  # noqa: E402
from groundtrace_langchain import GroundtraceCallbackHandler, uninstrument  # noqa: E402
from groundtrace_langchain.collector import COLLECTOR  # noqa: E402
from lc_app import CollectingSink  # noqa: E402


@pytest.fixture
def sink() -> CollectingSink:
    return CollectingSink()


@pytest.fixture
def monitor(sink: CollectingSink) -> Iterator[Monitor]:
    monitor = Monitor(metrics=["lexical"], sinks=[sink], flush_at_exit=False)
    yield monitor
    monitor.close()


@pytest.fixture
def handler(monitor: Monitor) -> GroundtraceCallbackHandler:
    return GroundtraceCallbackHandler(monitor=monitor)


@pytest.fixture
def unsaid_reasons() -> None:
    """Why a turn made no record is said once per process: a test that reads those lines starts with none said (the
    docs pages, run earlier in the same process, may have said some). The counts stay: they account for every root."""
    COLLECTOR.counts.reasons._said.clear()


@pytest.fixture
def capture_delta() -> Callable[[], dict[str, Any]]:
    """How the process-wide capture counters moved since the test began."""
    before = COLLECTOR.stats().as_dict()

    def delta() -> dict[str, Any]:
        after = COLLECTOR.stats().as_dict()
        moved: dict[str, Any] = {key: after[key] - before[key] for key in after
                                 if key not in ("in_flight", "no_record") and after[key] != before[key]}
        reasons = {reason: count - before["no_record"].get(reason, 0) for reason, count in after["no_record"].items()
                   if count != before["no_record"].get(reason, 0)}
        if reasons:  # why roots made no record, per reason
            moved["no_record"] = reasons
        return moved

    return delta


@pytest.fixture(autouse=True)
def nothing_leaks() -> Iterator[None]:
    """Every test ends with no run state left behind and no global instrumentation."""
    yield
    uninstrument()
    assert COLLECTOR.tracked_runs() == 0
    stats = COLLECTOR.stats()
    assert stats.in_flight == 0
    # every root is accounted for once: recorded + sum(no_record) + failed + evicted + not_turns + in_flight
    assert stats.roots == stats.recorded + sum(stats.no_record.values()) + stats.failed + stats.evicted \
        + stats.not_turns + stats.in_flight


@pytest.fixture
def span_exporter():
    """A real OpenTelemetry SDK provider (not installed globally) exporting to memory."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def global_tracer_provider(span_exporter):
    """The same provider installed as the global one, for this test only."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    provider, exporter = span_exporter
    trace.set_tracer_provider(provider)
    yield provider, exporter
    provider.shutdown()
    # The API lets a process set its provider once; undo it as opentelemetry's own test utilities
    # (opentelemetry.test.globals_test.reset_trace_globals) do, so later tests see no SDK.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
