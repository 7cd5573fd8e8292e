"""Scoring in a child process, so that the metrics' CPU never holds the application's GIL.

The child is a plain ``python -m groundtrace.scoring_process`` (not multiprocessing: a spawned
multiprocessing child re-imports the application's main module, which re-runs an unguarded
script). It reads one JSON request per line on stdin and writes one JSON Score per line on
stdout (a record's Scores on one line); a record that overruns its time budget gets the process
killed and restarted.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from groundtrace.record import Record
from groundtrace.score import Score

_READY = "ready"


def _pipe(stream: IO[str] | None) -> IO[str]:
    """A pipe of the child, which is always started with stdin and stdout piped."""
    if stream is None:
        raise RuntimeError("the scoring process has no pipe")
    return stream


class ScoringProcess:
    """One child process that scores records with metrics given by name and options."""

    def __init__(self, specs: Sequence[tuple[str, Mapping[str, Any]]], start_timeout_s: float = 60.0) -> None:
        self.specs = [(name, dict(options)) for name, options in specs]
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------- lifecycle
    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["GROUNDTRACE_ENABLED"] = "0"  # the child scores; it must not instrument itself
        bootstrap = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bootstrap")
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != bootstrap]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True, encoding="utf-8", env=env,
        )
        line = self._read_line(proc, self.start_timeout_s)
        if not line or line.strip() != _READY:
            self._kill(proc)
            raise RuntimeError(f"the scoring process did not start: {line!r}")
        return proc

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "groundtrace.scoring_process", json.dumps(self.specs)]

    def _process(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        return self._proc

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except Exception:
            pass

    def warm_up(self) -> None:
        with self._lock:
            self._process()

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                _pipe(proc.stdin).close()
                proc.wait(timeout=5)
            except Exception:
                self._kill(proc)

    # ------------------------------------------------------------------------------- scoring
    @staticmethod
    def _read_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
        """The next line; "" when the child closed its output (it died); None on timeout."""
        output = _pipe(proc.stdout)
        ready, _, _ = select.select([output], [], [], timeout)
        if not ready:
            return None
        return output.readline()

    def score_many(self, records: Sequence[Record], metric_timeout_s: float,
                   errors: Sequence[Any]) -> list[list[Score]]:
        """Scores of each record, in metric order. ``errors[i](message, record_id)`` makes metric
        i's error Score when the child cannot deliver (it hung and was killed, or it died).

        One record at a time, write then read: a child blocked writing a reply while this thread is
        still writing requests would deadlock on full pipes. A record may take ``metric_timeout_s``
        per metric; past that the child is killed and the next record gets a fresh one."""
        budget = metric_timeout_s * max(1, len(errors))
        results: list[list[Score]] = []
        with self._lock:
            for record in records:
                results.append(self._score_one(record, budget, errors))
        return results

    def _score_one(self, record: Record, budget: float, errors: Sequence[Any]) -> list[Score]:
        try:
            proc = self._process()
            requests = _pipe(proc.stdin)
            requests.write(record.model_dump_json() + "\n")
            requests.flush()
        except Exception as error:
            return [make(f"the scoring process failed: {error}", record.id) for make in errors]
        line = self._read_line(proc, budget)
        if not line:
            died = line == ""
            self._kill(proc)
            self._proc = None
            reason = "the scoring process died" if died else f"timed out after {budget:g} s (metric_timeout_s per metric)"
            return [make(reason, record.id) for make in errors]
        return [Score.model_validate(item) for item in json.loads(line)]


def _serve(specs: list[list[Any]]) -> None:
    from groundtrace.engine import build_metrics

    metrics = build_metrics([name for name, _ in specs], {name: options for name, options in specs if options})
    for metric in metrics:  # load models before "ready" (the start timeout), not inside a record's budget
        metric.warm_up()
    out = sys.stdout
    out.write(_READY + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            record: Any = Record.model_validate_json(line)
        except Exception:  # cannot happen with our parent; the metrics turn it into error Scores anyway
            record = {"id": None, "answer": None}
        scores = [metric.score(record).model_dump(mode="json") for metric in metrics]
        out.write(json.dumps(scores, ensure_ascii=False) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
