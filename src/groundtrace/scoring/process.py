"""Scoring in a child process: the application hands each record over once, and the child does the rest.

The child is a plain ``python -m groundtrace.scoring.child`` (not multiprocessing: a spawned
multiprocessing child re-imports the application's main module, which re-runs an unguarded script),
at the lowest CPU priority the system grants (``os.nice``). What the application's process does per
record is one JSON serialisation of it (pydantic's, in Rust) into a batch written to the child's
pipe, and one short line read back. The child validates the record, applies the mask where it can be
loaded by name (``module:function``; see :func:`groundtrace.privacy.mask_reference`), scores it,
strips the text when ``capture_text`` is off, and delivers the Scores to the sinks that may run out
of process (named ones whose class says ``out_of_process``: jsonl, langsmith, phoenix, langfuse).
Only when the application has sinks of its own (the otel sink on its TracerProvider, a sink object
of the user's, mlflow) does the child send the Scores back, and only then are they parsed here.

The protocol, one message a line on binary pipes:

- parent to child: one line of configuration (JSON: metrics, sinks, settings, mask, ...), then
  batches: one line per item (JSON ``[kind, mask, masked, reason, record]``; kind ``s`` score it,
  ``f`` deliver it with error Scores for ``reason``, ``i`` an input the application's mask failed
  on), an empty line ending each batch. End of input: the child closes its sinks and exits.
- child to parent: ``ready`` (or ``failed: why``); for each item ``d`` when its Scores go to the
  sinks, then ``o`` + ``index ok sink_errors ms child_cpu_s flagged`` (flagged: bit i set when the i-th
  metric flagged the answer), then, when the Monitor records metrics, the Scores' summary
  (groundtrace.telemetry.evaluations, one token), and, when the application has sinks of
  its own, JSON ``[record or null, scores]``; ``l`` + JSON ``[level, logger, message]`` for a
  warning of the child's, logged here.

A record that overruns its time budget (``metric_timeout_s`` per metric) gets the child killed; a
fresh one delivers it with error Scores and takes the rest of the batch. The parent reads the
child's lines at most once per ``poll_s``, not once per record: its thread wakes a few dozen times a
second under load, whatever the rate of records.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundtrace.record import Record
from groundtrace.redaction import get_logger
from groundtrace.score import Score
from groundtrace.telemetry.evaluations import Evaluations

log = get_logger("groundtrace.scoring.process")

_READY = "ready"
#: how long the sinks of one record may take in the child (each built-in sink bounds its own calls)
DELIVERY_TIMEOUT_S = 120.0


class ChildProcess:
    """A child that answers on its stdout, started on demand, killed when it overruns; a child that
    fails to start is not tried again for ``retry_after_s``, so a broken setup costs no time per batch."""

    def __init__(self, start_timeout_s: float = 60.0, retry_after_s: float = 10.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.retry_after_s = retry_after_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._buffer = b""
        self._failed: tuple[float, str] | None = None

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _configuration(self) -> bytes | None:
        """A first line for the child's stdin, before it says it is ready (never its command line,
        where every user of the machine can read it)."""
        return None

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["GROUNDTRACE_ENABLED"] = "0"  # the child scores; it must not instrument itself
        # groundtrace-run's folder (groundtrace.monitor.launcher): the child must not start it again
        bootstrap = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "monitor", "_bootstrap")
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != bootstrap]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(self._command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env)
        self._buffer = b""
        try:
            configuration = self._configuration()
            if configuration is not None:
                _pipe(proc.stdin).write(configuration)
                _pipe(proc.stdin).flush()
        except OSError:
            pass  # the child died at once: its answer below says so
        deadline = time.monotonic() + self.start_timeout_s
        line = self._read_line(proc, self.start_timeout_s)
        while line and line.startswith(b"l"):  # what the child said while starting (a metric that cannot load)
            _relay_log(line[1:])
            line = self._read_line(proc, max(0.0, deadline - time.monotonic()))
        if not line or line.strip() != _READY.encode():
            self._kill(proc)
            said = line.decode("utf-8", "replace").strip() if line else "no answer" if line is None else "it exited"
            raise RuntimeError(f"the scoring process did not start: {said}")
        return proc

    def _process(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._failed is not None and time.monotonic() - self._failed[0] < self.retry_after_s:
            raise ConnectionError(f"{self._failed[1]} (next attempt within {self.retry_after_s:g} s)")
        try:
            self._proc = self._start()
        except Exception as error:
            self._failed = (time.monotonic(), str(error))
            raise
        self._failed = None
        return self._proc

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except Exception:
            pass

    def _discard(self, proc: subprocess.Popen[bytes]) -> None:
        self._kill(proc)
        self._proc = None
        self._buffer = b""

    def warm_up(self) -> None:
        with self._lock:
            self._process()

    @property
    def start_failure(self) -> str | None:
        """Why the last start failed, while that is the last word on the child (None once one started)."""
        failed = self._failed
        return None if failed is None else failed[1]

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (for tests and benchmarks)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                _pipe(proc.stdin).close()
                deadline = time.monotonic() + timeout
                # what the child says while it closes its sinks (the last count of a failing sink) is relayed
                while (line := self._read_line(proc, max(0.0, deadline - time.monotonic()))):
                    if line.startswith(b"l"):
                        _relay_log(line[1:])
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                self._kill(proc)

    # ------------------------------------------------------------------------------- reading
    def _receive(self, proc: subprocess.Popen[bytes], timeout: float) -> tuple[list[bytes], bool]:
        """The complete lines that arrived within ``timeout`` (none when nothing did), and whether
        the child closed its output (it died)."""
        fd = _pipe(proc.stdout).fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
        if not ready:
            return [], False
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return [], True
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        return lines, False

    def _read_line(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes | None:
        """The next line; b"" when the child closed its output (it died); None on timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            fd = _pipe(proc.stdout).fileno()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"


def _pipe(stream: Any) -> Any:
    """A pipe of the child, which is always started with stdin and stdout piped."""
    if stream is None:
        raise RuntimeError("the scoring process has no pipe")
    return stream


# ------------------------------------------------------------------------------------ the hand-over
@dataclass(slots=True)
class Item:
    """One record on its way: ``masked`` when what is held here is what the sinks may see (the mask ran
    in this process, or there is none); else ``mask`` names the application's own mask for the child."""

    record: Record
    masked: bool = True
    mask: str | None = None
    kind: str = "s"
    reason: str | None = None


@dataclass(slots=True)
class Outcome:
    """How an item ended. ``deliver``: the record and Scores the application's own sinks still get;
    ``unscored``: no scoring process could take it (why), so the application makes the error Scores."""

    status: str  # "scored", "failed" or "dropped"
    sink_errors: int = 0
    latency_ms: float | None = None
    cpu_s: float = 0.0
    deliver: tuple[Record, list[Score]] | None = None
    unscored: str | None = None
    #: bit i set: the i-th metric flagged the answer as hallucinated
    flagged: int = 0
    #: the Scores' summary for the Monitor's metrics (the scoring process's encoding, decoded when used)
    evaluations: Evaluations | bytes | None = None
    #: ``deliver`` goes to every sink, not only the application's own: no scoring process saw it (a guard's Scores)
    everywhere: bool = False


_PLAIN = b'["s",null,true,null,'  # the usual item: score it, nothing to mask in the child


def encode(item: Item) -> bytes:
    """One request line: the record serialised once, by pydantic (a value JSON cannot hold is written
    as its str(), not refused), behind a head that says what to do with it."""
    body = Record.__pydantic_serializer__.to_json(item.record, fallback=str)
    if item.kind == "s" and item.masked:
        return _PLAIN + body + b"]\n"
    head = json.dumps([item.kind, item.mask, item.masked, item.reason]).encode()
    return head[:-1] + b"," + body + b"]\n"


class ScoringProcess(ChildProcess):
    """One child that scores records with metrics given by name and delivers their Scores."""

    def __init__(self, specs: Sequence[tuple[str, Mapping[str, Any]]], *, sinks: Sequence[str] = (),
                 settings: str | None = None, mask: str | None = None, capture_text: bool = True,
                 returns: bool = True, start_timeout_s: float = 60.0, retry_after_s: float = 10.0,
                 poll_s: float = 0.02, evaluations: bool = False) -> None:
        """``sinks``: names of the sinks the child builds (from ``settings``, Settings.to_json());
        ``mask``: the Monitor's mask by reference, applied in the child; ``returns``: the application
        has sinks of its own, so the child sends each record's Scores back; ``evaluations``: the Monitor
        records metrics, so the child sends each record's summary of its Scores."""
        super().__init__(start_timeout_s, retry_after_s)
        self.specs = [(name, dict(options)) for name, options in specs]
        self.sinks = list(sinks)
        self.settings = settings
        self.mask = mask
        self.capture_text = capture_text
        self.returns = returns
        self.poll_s = poll_s
        self.evaluations = evaluations
        self._child_cpu = 0.0

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "groundtrace.scoring.child"]

    def _configuration(self) -> bytes:
        self._child_cpu = 0.0
        paths = [p for p in sys.path if p and not p.endswith("_bootstrap")]  # what this process can import
        return json.dumps({"metrics": self.specs, "sinks": self.sinks, "settings": self.settings, "mask": self.mask,
                           "capture_text": self.capture_text, "returns": self.returns, "sys_path": paths,
                           "evaluations": self.evaluations}).encode() + b"\n"

    def run(self, items: list[Item], metric_timeout_s: float, settle: Callable[[Item, Outcome], None],
            stopping: Callable[[], bool] = lambda: False) -> None:
        """Hand ``items`` to the child and ``settle`` each as its outcome comes back. A record may take
        ``metric_timeout_s`` per metric; past that the child is killed and a fresh one delivers it
        with error Scores and goes on with the rest. ``stopping()``: give up now (the Monitor closes):
        the child is killed and what it still held is dropped."""
        budget = metric_timeout_s * max(1, len(self.specs))
        pending = items
        with self._lock:
            while pending:
                try:
                    proc = self._process()
                except Exception as error:
                    for item in pending:
                        settle(item, Outcome("failed", unscored=f"the scoring process failed: {error}"))
                    return
                pending = self._exchange(proc, pending, budget, settle, stopping)

    def _exchange(self, proc: subprocess.Popen[bytes], items: list[Item], budget: float,
                  settle: Callable[[Item, Outcome], None], stopping: Callable[[], bool]) -> list[Item]:
        """One batch through one child; what is left when the child had to go (to send to the next)."""
        done, delivering, eof = 0, False, False
        try:
            _pipe(proc.stdin).write(b"".join(map(encode, items)) + b"\n")
            _pipe(proc.stdin).flush()
        except OSError:  # it died before it read the batch
            return self._after_loss(proc, items, 0, False, None, settle)
        last = time.monotonic()
        while done < len(items):
            if stopping():
                if delivering:  # its Scores are on their way to the sinks: counted as they end, not as dropped
                    done += self._last_outcome(proc, items[done], settle)
                self._discard(proc)
                for item in items[done:]:
                    settle(item, Outcome("dropped"))
                return []
            remaining = last + (DELIVERY_TIMEOUT_S if delivering else budget) - time.monotonic()
            if remaining <= 0:
                break
            lines, eof = self._receive(proc, min(remaining, 0.5))
            for line in lines:
                tag = line[:1]
                if tag == b"o":
                    settle(items[done], self._outcome(items[done], line[1:]))
                    done, delivering, last = done + 1, False, time.monotonic()
                elif tag == b"d":
                    delivering, last = True, time.monotonic()
                elif tag == b"l":
                    _relay_log(line[1:])
            if eof:
                break
            if lines and done < len(items):
                time.sleep(self.poll_s)  # let more outcomes gather: one wake per poll, not one per record
        if done == len(items):
            return []
        return self._after_loss(proc, items, done, delivering, None if eof else budget, settle)

    def _last_outcome(self, proc: subprocess.Popen[bytes], item: Item, settle: Callable[[Item, Outcome], None],
                      wait_s: float = 2.0) -> int:
        """The record the child is delivering when the Monitor stops: settled by its outcome, waited for a moment,
        else as failed with one sink error (it may or may not have reached a sink). Returns 1: it is settled."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            lines, eof = self._receive(proc, min(0.1, deadline - time.monotonic()))
            for line in lines:
                if line[:1] == b"o":
                    settle(item, self._outcome(item, line[1:]))
                    return 1
                if line[:1] == b"l":
                    _relay_log(line[1:])
            if eof:
                break
        settle(item, Outcome("failed", sink_errors=1))
        return 1

    def _after_loss(self, proc: subprocess.Popen[bytes], items: list[Item], done: int, delivering: bool,
                    overran: float | None, settle: Callable[[Item, Outcome], None]) -> list[Item]:
        """The child died (``overran`` None) or overran: it goes; the item it held is settled or sent
        back with error Scores, and the rest go to the next child."""
        self._discard(proc)
        current, rest = items[done], items[done + 1:]
        if delivering:
            what = "died" if overran is None else f"took over {DELIVERY_TIMEOUT_S:g} s"
            log.warning("groundtrace: the scoring process %s delivering record %s; it was restarted", what,
                        current.record.id)
            settle(current, Outcome("failed", sink_errors=1))
            return rest
        reason = ("the scoring process died" if overran is None
                  else f"timed out after {overran:g} s (metric_timeout_s per metric)")
        if current.kind != "s":  # it failed already once: no third try, its error Scores stay here
            settle(current, Outcome("failed", unscored=current.reason or reason))
            return rest
        log.warning("groundtrace: record %s not scored: %s", current.record.id, reason)
        return [Item(current.record, current.masked, current.mask, "f", reason), *rest]

    def _outcome(self, item: Item, payload: bytes) -> Outcome:
        """``index ok sink_errors ms cpu_s flagged[ summary][ json]``: six numbers split, not parsed as
        JSON; the summary kept as it came (decoded only where metrics are recorded); the JSON (the record
        if the child changed it, and the Scores) only for the application's own sinks."""
        extra = 1 if self.evaluations else 0
        fields = payload.split(b" ", 6 + extra)
        cpu = float(fields[4])
        spent, self._child_cpu = max(0.0, cpu - self._child_cpu), cpu
        outcome = Outcome("scored" if fields[1] == b"1" else "failed", int(fields[2]), float(fields[3]), spent,
                          flagged=int(fields[5]), evaluations=fields[6].rstrip() if extra else None)
        if self.returns and len(fields) > 6 + extra:
            changed, scores = json.loads(fields[6 + extra].decode("utf-8"))
            record = item.record if changed is None else Record.model_validate(changed)
            outcome.deliver = (record, [Score.model_validate(score) for score in scores])
        return outcome


def _relay_log(payload: bytes) -> None:
    try:
        level, name, message = json.loads(payload)
        get_logger(str(name)).log(int(level), "%s (in the scoring process)", message)
    except Exception:
        log.warning("groundtrace: the scoring process wrote an unreadable log line")


@dataclass
class ScoringSetup:
    """What a Monitor's scoring processes are built from (one process per worker)."""

    specs: list[tuple[str, dict[str, Any]]]
    sinks: list[str] = field(default_factory=list)
    settings: str | None = None
    mask: str | None = None
    capture_text: bool = True
    returns: bool = True
    evaluations: bool = False

    def build(self) -> ScoringProcess:
        return ScoringProcess(self.specs, sinks=self.sinks, settings=self.settings, mask=self.mask,
                              capture_text=self.capture_text, returns=self.returns, evaluations=self.evaluations)
