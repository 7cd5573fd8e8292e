"""JSONL sink: one line per record with all its Scores (the input of ``groundtrace report``).

It survives the world around the file: a path that cannot be opened when the sink is built (a folder that is
not there yet, a read-only mount) is no error then (it is tried again at each emit, and a record it cannot
write is a sink error, said with its cause); a file
removed, renamed by log rotation, or whose folder was removed and made again, is noticed at the next emit (as
logging's WatchedFileHandler does: the path's device and inode against the open file's) and opened anew; a
line is written whole or not at all: one ``os.write`` of the whole line, and a write that fails part-way (a
full disk) is cut back off the file, so a reader never meets a torn line. A failed write raises, and the
Monitor counts it in ``sink_errors``.
"""

from __future__ import annotations

import os
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
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._closed = False
        try:
            with self._lock:
                self._open()
        except OSError:  # each emit tries again (the folder may come, the mount turn writable); one that fails is
            pass  # counted in sink_errors and said, with its cause, as a rate

    @classmethod
    def from_settings(cls, settings: Settings) -> JsonlSink:
        return cls(settings.jsonl_path)

    @classmethod
    def from_argument(cls, path: str, settings: Settings) -> JsonlSink:
        """``jsonl:PATH`` where sinks are named: this file, whatever GROUNDTRACE_JSONL_PATH says."""
        return cls(path)

    def _open(self) -> int:
        """(Lock held.) The file, opened anew (its folder made) when it is not open or no longer the path's."""
        if self._fd is not None:
            try:
                found = os.stat(self.path)
                if (found.st_dev, found.st_ino) == self._identity:
                    return self._fd
            except FileNotFoundError:
                pass  # removed, or its folder was: open a new one below
            os.close(self._fd)
            self._fd = self._identity = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        opened = os.fstat(fd)
        self._fd, self._identity = fd, (opened.st_dev, opened.st_ino)
        return fd

    def emit(self, record: Record, scores: list[Score]) -> None:
        line = (ScoredRecord(record=record, scores=scores).model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the jsonl sink for {self.path} is closed")
            fd = self._open()
            start = os.lseek(fd, 0, os.SEEK_END)
            try:
                written = 0
                while written < len(line):  # a pipe or a slow disk may take it in parts; a full one fails
                    written += os.write(fd, line[written:])
            except OSError:
                try:
                    os.ftruncate(fd, start)  # no torn line: what was written of it goes
                except OSError:
                    pass
                raise

    def flush(self) -> None:
        """Each line is the operating system's once emit() returns: nothing is buffered here."""

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
