"""Sinks written as a user would: plain classes, no groundtrace base class (importable by name for
``--sinks tests.custom_sinks:PlainSink``)."""

from __future__ import annotations

import threading
from typing import Any, ClassVar


class PlainSink:
    """Only emit(): no name, no flush, no close, no trace_link. Every instance files what it gets
    in the class's list too, so a test can see what a sink built by name received."""

    received: ClassVar[list[tuple[Any, list[Any]]]] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.got: list[tuple[Any, list[Any]]] = []

    def emit(self, record: Any, scores: list[Any]) -> None:
        with self._lock:
            self.got.append((record, scores))
            PlainSink.received.append((record, scores))


class NamedSink(PlainSink):
    """What the sinks docstring described: name, emit and flush (the issue's example)."""

    name = "mine"

    def __init__(self) -> None:
        super().__init__()
        self.flushed = 0

    def flush(self) -> None:
        self.flushed += 1
