"""The scoring process (``python -m groundtrace.scoring.child``): what a Monitor hands off its process.

For each record the application handed over (see :mod:`groundtrace.scoring.process` for the
protocol): validate it, apply the mask (the application's own, loaded here by name), score it,
strip its text when ``capture_text`` is off, deliver the Scores to the sinks built here, and answer
with one short line (the Scores too, when the application has sinks of its own). It runs at the
lowest CPU priority the system grants, so that on a busy machine the application's threads come
first. Whatever a library prints goes to stderr: stdout carries the protocol only. Its stderr is the
application's, so when the application is gone (it crashed, or exited while this process started) it
ends without a word, and Ctrl-C in a terminal is the application's to handle: the application's own
error stays first and alone.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import IO, Any

from groundtrace._extras import MissingExtraError
from groundtrace.config import Settings
from groundtrace.scoring.engine import build_metrics
from groundtrace.privacy import Mask, chain_masks, load_mask, take_in, without_text
from groundtrace.record import InvalidInput, Record, placeholder_record
from groundtrace.redaction import get_logger, redact
from groundtrace.score import Score
from groundtrace.sinks import build_sinks, close_sinks, emit_all, flush_sinks
from groundtrace.telemetry.evaluations import summarize

log = get_logger("groundtrace.scoring.child")
#: the niceness the scoring process asks for (19: the lowest priority an unprivileged process gets)
NICENESS = 19


class Channel:
    """The protocol's pipe to the application; one whole line per write, whichever thread writes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, line: bytes) -> None:
        with self._lock:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]


class RelayHandler(logging.Handler):
    """groundtrace's warnings in this process, sent to the application's process to be logged there."""

    def __init__(self, channel: Channel) -> None:
        super().__init__(logging.WARNING)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()  # the redacting filter ran already
            self.channel.send(b"l" + json.dumps([record.levelno, record.name, message]).encode() + b"\n")
        except BrokenPipeError:  # the application is gone: there is no one to tell
            pass
        except Exception:
            self.handleError(record)


def lower_priority(niceness: int = NICENESS) -> None:
    """The lowest CPU priority the system grants, where it has one (not on Windows)."""
    try:
        os.nice(niceness)
    except (AttributeError, OSError):
        pass


class Server:
    """The metrics, sinks and masks of one scoring process, and what it does with each item."""

    def __init__(self, config: dict[str, Any], channel: Channel) -> None:
        specs = config["metrics"]
        self.metrics = build_metrics([name for name, _ in specs], {name: options for name, options in specs if options})
        settings = Settings.from_json(config["settings"]) if config.get("settings") else None
        self.sinks = build_sinks(config["sinks"], settings, tolerant=True) if config.get("sinks") else []
        self.mask = load_mask(config.get("mask"))
        self.capture_text = bool(config.get("capture_text", True))
        self.returns = bool(config.get("returns", False))
        self.evaluations = bool(config.get("evaluations", False))
        self.channel = channel
        self._call_masks: dict[str, Mask] = {}
        self.cannot_load = warm_up_all(self.metrics)  # models load now, as part of the start
        #: the CPU reported is what scoring used since the process was ready, not its start (imports, models)
        self.started_cpu = time.process_time()

    def serve(self, requests: IO[bytes]) -> None:
        """Batches until the application closes the pipe; then the sinks are closed."""
        try:
            while True:
                batch = []
                for line in requests:
                    if not line.strip():
                        break
                    batch.append(line)
                else:  # end of input (a batch cut short means the application is gone)
                    return
                for index, line in enumerate(batch):
                    self.handle(index, line, last=index == len(batch) - 1)
        finally:
            for problem in close_sinks(self.sinks):
                log.warning("groundtrace: %s", problem)

    def handle(self, index: int, line: bytes, *, last: bool) -> None:
        started = time.perf_counter()
        try:
            record, scores, changed = self._score(*json.loads(line))
        except Exception as error:  # cannot happen with our parent; still error Scores, never a silent loss
            record, changed = Record(), False
            scores = [m.error(f"the scoring process could not read the record: {type(error).__name__}", None)
                      for m in self.metrics]
        summary = summarize(record, scores).encode() if self.evaluations else None  # before the text goes
        if not self.capture_text:
            record, scores, changed = *without_text(record, scores), True
        if self.sinks:
            self.channel.send(b"d\n")
        sink_errors = emit_all(self.sinks, record, scores)
        if last:  # the batch is out before the application hears it is done
            for problem in flush_sinks(self.sinks):
                log.warning("groundtrace: %s", problem)
        line = b"o%d %d %d %.3f %.6f %d" % (index, all(s.ok for s in scores), sink_errors,
                                            (time.perf_counter() - started) * 1000.0,
                                            time.process_time() - self.started_cpu, flagged_mask(scores))
        if summary is not None:
            line += b" " + summary
        if self.returns:
            back = [record.model_dump(mode="json") if changed else None, [s.model_dump(mode="json") for s in scores]]
            line += b" " + json.dumps(back, ensure_ascii=False).encode()
        self.channel.send(line + b"\n")

    def _score(self, kind: str, mask: str | None, masked: bool, reason: str | None,
               raw: dict[str, Any]) -> tuple[Record, list[Score], bool]:
        """The record to deliver, its Scores, and whether the record differs from what the application holds."""
        if kind == "i":  # the application's mask failed on it: its id and every metric's error Score
            invalid = InvalidInput(id=raw.get("id"), message=reason or "invalid record")
            return placeholder_record(invalid), [m.score(invalid) for m in self.metrics], True
        record = Record.model_validate(raw)
        changed = False
        if not masked:
            taken = take_in(record, chain_masks(self._call_mask(mask), self.mask))
            if isinstance(taken, InvalidInput):
                log.warning("groundtrace: record %s not scored: %s", record.id, taken.message)
                return placeholder_record(taken), [m.score(taken) for m in self.metrics], True
            record, changed = taken, True
        if kind == "f":
            return record, [m.error(reason or "not scored", record.id) for m in self.metrics], changed
        return record, [self._scored(m, record) for m in self.metrics], changed

    def _scored(self, metric: Any, record: Record) -> Score:
        cannot_load = self.cannot_load.get(metric.name)
        if cannot_load is not None:  # a setting that will not heal: no new attempt, the reason at once
            return metric.error(cannot_load, record.id)
        return metric.score(record)

    def _call_mask(self, reference: str | None) -> Mask | None:
        if reference is None:
            return None
        if reference not in self._call_masks:
            try:
                self._call_masks[reference] = load_mask(reference) or _unloadable(reference)
            except ValueError as error:
                log.warning("groundtrace: %s: its records are not scored", error)
                self._call_masks[reference] = _unloadable(reference)
        return self._call_masks[reference]


#: load failures that may heal by themselves; any other is a setting (a model, an option, an extra) to fix
TRANSIENT_LOAD_ERRORS: tuple[type[BaseException], ...] = (MemoryError, InterruptedError)


def flagged_mask(scores: list[Score]) -> int:
    """Which metrics flagged the answer: bit i set when the i-th Score says hallucinated."""
    return sum(1 << index for index, score in enumerate(scores) if score.hallucinated)


def _load_hint(error: BaseException) -> str:
    if isinstance(error, MissingExtraError):
        return "see the pip install above, then restart the application"
    return ("see the metric's options (options= or GROUNDTRACE_OPTIONS) and GROUNDTRACE_METRICS, "
            "then restart the application")


def _prepare(metric: Any) -> None:
    """Load what the metric needs, raising what stops it: ``preflight()`` and ``prepare()`` of a Metric
    whose ``warm_up()`` is the base's (which would swallow the error), as the batch engines ask them;
    else its own ``warm_up()``."""
    from groundtrace.metrics import Metric

    if isinstance(metric, Metric) and type(metric).warm_up is Metric.warm_up:
        metric.preflight()
        metric.prepare()
        return
    warm_up = getattr(metric, "warm_up", None)
    if callable(warm_up):
        warm_up()


def warm_up_all(metrics: list[Any]) -> dict[str, str]:
    """Load each metric's model now (a worker, a scoring process: before the first record, outside its
    time and CPU budget). Returns the metrics that cannot load, by name, with the reason: a load failure
    is a setting that will not heal (unless it is one of TRANSIENT_LOAD_ERRORS), so it is said once at
    ERROR and each record gets it as its error Score at once, with no new attempt."""
    cannot_load: dict[str, str] = {}
    for metric in metrics:
        try:
            _prepare(metric)
        except TRANSIENT_LOAD_ERRORS as error:
            log.warning("groundtrace: metric %s did not warm up: %s; the next record tries again", metric.name, error)
        except Exception as error:
            reason = str(error).strip().replace("\n", " ").rstrip(".") or type(error).__name__
            cannot_load[metric.name] = f"metric {metric.name} cannot load: {reason}"
            log.error("groundtrace: metric %s cannot load: %s. Records are counted failed until the setting is "
                      "fixed; %s", metric.name, reason, _load_hint(error))
    return cannot_load


def _unloadable(reference: str) -> Mask:
    def refuse(text: str) -> str:
        raise LookupError(f"the mask {reference} cannot be loaded in the scoring process")

    return refuse


def main() -> None:
    # Ctrl-C, and a SIGTERM a process manager sends the whole group (systemd's default stop), reach us too: the
    # application decides, and its exit closes our stdin once what it held is scored (or kills us past its bound)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        _run()
    except BrokenPipeError:  # the application is gone (it crashed or exited): nothing to say, nowhere to say it
        pass


def _run() -> None:
    channel = Channel(os.dup(1))  # the protocol's own pipe ...
    os.dup2(2, 1)  # ... and whatever a library prints goes to stderr, not into it
    lower_priority()
    requests = sys.stdin.buffer
    try:
        config = json.loads(requests.readline())
        for path in config.get("sys_path") or []:  # after our own: what the application could import
            if path not in sys.path:
                sys.path.append(path)
        logging.getLogger("groundtrace").addHandler(RelayHandler(channel))
        server = Server(config, channel)
    except Exception as error:
        channel.send(redact(f"failed: {type(error).__name__}: {error}").replace("\n", " ").encode() + b"\n")
        return
    channel.send(b"ready\n")
    server.serve(requests)


if __name__ == "__main__":
    main()
