"""Each guard decision where the team looks: attributes on the request's current OpenTelemetry span, and the
``groundtrace.guard.decisions`` counter and ``groundtrace.guard.duration`` histogram on the Monitor's instruments
(or the application's MeterProvider). Both run on the request's path, so both are an attribute set and an add."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from groundtrace.guards.decision import Decision
from groundtrace.redaction import get_logger

if TYPE_CHECKING:
    from groundtrace.monitor import Monitor

log = get_logger("groundtrace.guard")


class DecisionTelemetry:
    """Where one guard's decisions are recorded (its Monitor's instruments, else the application's provider,
    looked for again at most once a second until there is one)."""

    def __init__(self, monitor: Monitor | None) -> None:
        self.monitor = monitor
        self._lazy: Any = None

    def record(self, decision: Decision, timed_out: bool) -> None:
        try:
            _on_span(decision)
            instruments = self._instruments()
            if instruments is not None:
                from groundtrace.telemetry.instruments import GUARD_ACTION, GUARD_TIMED_OUT

                attributes = {GUARD_ACTION: decision.action, GUARD_TIMED_OUT: timed_out}
                instruments.guard_decisions.add(1, attributes)
                instruments.guard_duration.record(decision.seconds, {GUARD_ACTION: decision.action})
        except Exception as error:  # telemetry must never cost the answer: said, and the answer goes on
            log.warning("groundtrace guard: recording a decision failed (%s)", type(error).__name__)

    def _instruments(self) -> Any:
        telemetry = None if self.monitor is None else self.monitor.telemetry
        if telemetry is not None:
            return telemetry.instruments()
        if "opentelemetry.metrics" not in sys.modules:  # no application provider without the API imported
            return None
        if self._lazy is None:
            from groundtrace.telemetry import _Lazy

            self._lazy = _Lazy()
        found = self._lazy()
        if found is not None:
            self._lazy = lambda: found
        return found


def _on_span(decision: Decision) -> None:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {"groundtrace.guard.action": decision.action,
                                  "groundtrace.guard.seconds": round(decision.seconds, 6)}
    if decision.hallucinated is not None:
        attributes["groundtrace.guard.hallucinated"] = decision.hallucinated
    span.set_attributes(attributes)
