"""JSONL sink: one line per record with all its Scores (the input of ``groundtrace report``)."""

from __future__ import annotations

import threading
from pathlib import Path

from groundtrace.config import DEFAULT_JSONL_PATH, Settings
from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord
from groundtrace.sinks import Sink


class JsonlSink(Sink):
    name = "jsonl"
    out_of_process = True

    def __init__(self, path: str | Path | None = None) -> None:
        """``path``: the file to append to; by default the environment's (GROUNDTRACE_JSONL_PATH,
        else groundtrace-scores.jsonl)."""
        self.path = Path(path or Settings.from_env().jsonl_path or DEFAULT_JSONL_PATH)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # line-buffered: a line is the operating system's once emit() returns, so a scoring process
        # killed the moment after loses none it reported delivered
        self._handle = open(self.path, "a", encoding="utf-8", buffering=1)

    @classmethod
    def from_settings(cls, settings: Settings) -> JsonlSink:
        return cls(settings.jsonl_path)

    @classmethod
    def from_argument(cls, path: str, settings: Settings) -> JsonlSink:
        """``jsonl:PATH`` where sinks are named: this file, whatever GROUNDTRACE_JSONL_PATH says."""
        return cls(path)

    def emit(self, record: Record, scores: list[Score]) -> None:
        line = ScoredRecord(record=record, scores=scores).model_dump_json() + "\n"
        with self._lock:
            self._handle.write(line)

    def flush(self) -> None:
        with self._lock:
            if not self._handle.closed:
                self._handle.flush()

    def close(self) -> None:
        with self._lock:
            if not self._handle.closed:
                self._handle.close()
