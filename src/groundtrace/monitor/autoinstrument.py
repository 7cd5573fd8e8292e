"""Instrument every installed framework integration, for enabling groundtrace without code.

Integrations announce themselves through the ``groundtrace.instrumentors`` entry point group
(``groundtrace-langchain``, ``groundtrace-llamaindex``); the core never imports a framework.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from groundtrace.config import Settings
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.monitor.autoinstrument")


def instrument_all(*, force: bool = False) -> list[str]:
    """Call every registered ``instrument()``; returns the names that succeeded.

    Does nothing unless GROUNDTRACE_ENABLED is set (or ``force``). A failing integration is
    logged and skipped: the application starts regardless.
    """
    if not force:
        try:
            enabled = Settings.from_env().enabled
        except ValueError as error:  # a bad GROUNDTRACE_* value: say which, and let the application start
            log.warning("groundtrace: nothing instrumented: %s", error)
            return []
        if not enabled:
            return []
    done = []
    for entry in entry_points(group="groundtrace.instrumentors"):
        try:
            entry.load()()
            done.append(entry.name)
        except Exception as error:
            log.warning("groundtrace: could not instrument %s: %s", entry.name, error)
    if done:
        log.info("groundtrace: instrumented %s", ", ".join(done))
    return done
