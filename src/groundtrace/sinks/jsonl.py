"""JSONL sink: one line per record with all its Scores (the input of ``groundtrace report``).

It survives the world around the file: the file is opened at the first emit, on the Monitor's worker, within
OPEN_TIMEOUT_S (a FIFO no process reads is refused at once, an open that hangs is left waiting in a thread
of its own and taken when it comes); a path that cannot be opened (a folder that is not there yet, a
read-only mount) is tried again at each emit, and a record it cannot write is a sink error, said with its
cause; a file
removed, renamed by log rotation, or whose folder was removed and made again, is noticed at the next emit (as
logging's WatchedFileHandler does: the path's device and inode against the open file's) and opened anew; a
line is written whole or not at all: one ``os.write`` of the whole line, and a write that fails part-way (a
full disk) is cut back off the file, so a reader never meets a torn line. Several processes may append to one
file: each write and its cut-back hold an exclusive ``flock``, and a cut-back takes only this writer's own bytes
(never another's line, never past the file's end). A failed write raises, and the Monitor counts it in
``sink_errors``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
from pathlib import Path

from groundtrace.config import DEFAULT_JSONL_PATH, Settings
from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord
from groundtrace.sinks import Sink

#: seconds the file may take to open (a FIFO or a network mount can take forever)
OPEN_TIMEOUT_S = 5.0


def _lock(fd: int) -> bool:
    """An exclusive lock on the file, taken by every JsonlSink that appends to it; False where the file system
    has none (the tail check of the cut-back still holds for the writers the lock would have kept out)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    except OSError:
        return False


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
        self._pid = 0  # the process that opened the file
        self._regular = True  # a regular file (else a FIFO or a character device: no seek, no cut back)
        self._closed = False
        # the file is opened at the first emit, on the Monitor's worker, never here on the application's thread: a
        # FIFO nobody reads or a hung network mount would hold the constructor (and the app) forever
        self._opening: threading.Thread | None = None  # an open that did not return in time, still waiting
        self._opened: list[int | OSError] = []  # what that open returned, if it ever does

    @classmethod
    def from_settings(cls, settings: Settings) -> JsonlSink:
        return cls(settings.jsonl_path)

    @classmethod
    def from_argument(cls, path: str, settings: Settings) -> JsonlSink:
        """``jsonl:PATH`` where sinks are named: this file, whatever GROUNDTRACE_JSONL_PATH says."""
        return cls(path)

    def _open(self) -> int:
        """(Lock held.) The file, opened anew (its folder made) when it is not open or no longer the path's."""
        if self._fd is not None and self._pid != os.getpid():
            os.close(self._fd)  # inherited through fork: a file description shared with the parent shares its lock
            self._fd = self._identity = None
        if self._fd is not None:
            try:
                found = os.stat(self.path)
                if (found.st_dev, found.st_ino) == self._identity:
                    return self._fd
            except FileNotFoundError:
                pass  # removed, or its folder was: open a new one below
            os.close(self._fd)
            self._fd = self._identity = None
        fd = self._open_bounded()
        opened = os.fstat(fd)
        self._fd, self._identity, self._pid = fd, (opened.st_dev, opened.st_ino), os.getpid()
        self._regular = stat.S_ISREG(opened.st_mode)
        return fd

    def _open_bounded(self) -> int:
        """(Lock held.) Open the path within OPEN_TIMEOUT_S, in a thread of its own. A FIFO with no reader is
        refused at once (O_NONBLOCK: ENXIO); an open that hangs (a dead network mount) is left waiting in its
        thread, the record fails with why, and the next emit takes its result if it has come meanwhile."""
        if self._opening is not None:
            if self._opening.is_alive():
                raise TimeoutError(f"{self.path} has not opened yet (after {OPEN_TIMEOUT_S:g} s and more): a hung "
                                   "mount? records are not written until it opens")
            self._opening = None
            late = self._opened.pop() if self._opened else None
            if isinstance(late, int):
                return late  # an error that came late: open again below
        outcome: list[int | OSError] = []

        def run() -> None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
                os.set_blocking(fd, True)  # writes wait as usual; only the open must not
                outcome.append(fd)
            except OSError as error:
                outcome.append(error)

        opener = threading.Thread(target=run, name="groundtrace-jsonl-open", daemon=True)
        opener.start()
        opener.join(OPEN_TIMEOUT_S)
        if opener.is_alive():
            self._opening, self._opened = opener, outcome  # an fd or an error, when it comes
            raise TimeoutError(f"{self.path} did not open within {OPEN_TIMEOUT_S:g} s (a hung mount?): the record "
                               "is not written; the next one takes the file if it has opened by then")
        [result] = outcome
        if isinstance(result, OSError):
            if result.errno == errno.ENXIO:
                raise OSError(result.errno, f"{self.path} is a FIFO that no process reads") from None
            raise result
        return result

    def emit(self, record: Record, scores: list[Score]) -> None:
        line = (ScoredRecord(record=record, scores=scores).model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the jsonl sink for {self.path} is closed")
            fd = self._open()
            if not self._regular:  # a pipe cannot seek nor be cut back: it may take the line in parts
                written = 0
                while written < len(line):
                    written += os.write(fd, line[written:])
                return
            # other processes append to the same file (a Monitor's scoring children, gunicorn's workers): the lock
            # keeps each one's write and cut-back whole, so what is cut back is this writer's own bytes
            locked = _lock(fd)
            try:
                written = os.write(fd, line)  # O_APPEND: at the file's end, whatever the others wrote
                if written != len(line):  # a full disk (or the file size limit) took part of it
                    self._cut_back(fd, written)
                    raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {self.path} took {written} of "
                                                f"{len(line)} bytes of the line, which are cut back")
            finally:
                if locked:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _cut_back(self, fd: int, written: int) -> None:
        """(Locks held.) Take this writer's ``written`` bytes of a torn line off the file: truncated while they are
        its tail; blanked in place when a writer that takes no lock has appended after them (truncating would cut
        its line, and a fragment left would glue onto it). Never beyond the file's size: no NUL bytes."""
        if not written:
            return
        try:
            end = os.lseek(fd, 0, os.SEEK_CUR)  # an O_APPEND write leaves the offset at the end of its own bytes
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)
                return
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_APPEND)  # pwrite on O_APPEND appends, on Linux
            try:
                os.pwrite(fd, b" " * (written - 1) + b"\n", end - written)  # a blank line: every reader skips it
            finally:
                fcntl.fcntl(fd, fcntl.F_SETFL, flags)
        except OSError:
            pass  # the fragment stays: its readers skip it

    def flush(self) -> None:
        """Each line is the operating system's once emit() returns: nothing is buffered here."""

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
