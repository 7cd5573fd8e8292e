"""A handler that builds its Monitor (``GroundtraceCallbackHandler(metrics=..., sinks=...)``) follows the Monitor's
one rule: what it is given wins, every other setting is the environment's, GROUNDTRACE_TELEMETRY as much as
GROUNDTRACE_MASK (tests/test_monitor_settings.py checks each setting of the Monitor)."""

from __future__ import annotations

from groundtrace_langchain import GroundtraceCallbackHandler


def test_a_handler_building_its_monitor_takes_what_it_is_not_given_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GROUNDTRACE_TELEMETRY", "prometheus:127.0.0.1:0")
    monkeypatch.setenv("GROUNDTRACE_SAMPLE_RATE", "0.5")
    monkeypatch.setenv("GROUNDTRACE_CAPTURE_TEXT", "false")
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks="none", isolation="thread")
    try:
        monitor = handler.monitor
        assert monitor.telemetry is not None and monitor.telemetry.endpoint is not None  # a scrape endpoint
        assert (monitor.sample_rate, monitor.capture_text) == (0.5, False)
    finally:
        handler.close()
    given = GroundtraceCallbackHandler(metrics=["lexical"], sinks="none", isolation="thread", telemetry="none",
                                       sample_rate=1.0)
    try:
        assert given.monitor.telemetry is None and given.monitor.sample_rate == 1.0
    finally:
        given.close()
