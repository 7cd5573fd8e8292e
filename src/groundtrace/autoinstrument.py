"""Instrument every installed framework integration, for enabling groundtrace without code.

Integrations announce themselves through the ``groundtrace.instrumentors`` entry point group
(``groundtrace-langchain``, ``groundtrace-llamaindex``); the core never imports a framework.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from groundtrace.config import env_flag

log = logging.getLogger("groundtrace.autoinstrument")


def instrument_all(*, force: bool = False) -> list[str]:
    """Call every registered ``instrument()``; returns the names that succeeded.

    Does nothing unless GROUNDTRACE_ENABLED is set (or ``force``). A failing integration is
    logged and skipped: the application starts regardless.
    """
    if not force and not env_flag("GROUNDTRACE_ENABLED"):
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
