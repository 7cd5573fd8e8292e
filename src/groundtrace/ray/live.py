"""RayScorer: the Monitor's batches scored by Ray actors (``Monitor(isolation="ray")``).

The Ray driver runs in a child process, not in the application: a Ray driver whose cluster goes
away may be ended by Ray itself, and that must never be the application. The child
(``python -m groundtrace.ray.live``) joins the cluster, starts one actor that builds the metrics
once, then takes one batch per line on stdin (a JSON list of Records) and answers one line (each
record's Scores, or ``{"error": ...}``). RayScorer is a
:class:`groundtrace.scoring.process.ChildProcess` (``warm_up``, ``close``) whose ``score_many``
returns each record's Scores, so the Monitor's contract holds unchanged; whatever goes wrong (no
cluster, a dead child or actor, a timeout) becomes error Scores for the batch, which the Monitor
counts as failed. The mask runs and the sinks deliver in the application (the cluster may be another
machine).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from groundtrace.ray.batch import BatchScorer, score_items
from groundtrace.record import Record
from groundtrace.score import Score
from groundtrace.scoring.process import _READY, ChildProcess, _pipe


class RayScorer(ChildProcess):
    """One child process driving one Ray actor; the Monitor makes one per worker.

    ``address``: "auto", "HOST:PORT", "ray://HOST:PORT", or None/"local" (a cluster of the child's
    own). After the child fails to start (no cluster), batches fail at once for ``retry_after_s``,
    so a dead cluster costs the Monitor no time per batch."""

    def __init__(self, specs: Sequence[tuple[str, Mapping[str, Any]]], address: str | None = None, *,
                 start_timeout_s: float = 180.0, retry_after_s: float = 30.0) -> None:
        super().__init__(start_timeout_s, retry_after_s)
        self.specs = [(name, dict(options)) for name, options in specs]
        self.address = address or "local"

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "groundtrace.ray.live", json.dumps(self.specs), self.address]

    def score_many(self, records: Sequence[Record], metric_timeout_s: float,
                   errors: Sequence[Any]) -> list[list[Score]]:
        """Scores of each record, in metric order; ``errors[i](message, record_id)`` makes metric i's
        error Score when Ray cannot deliver. A batch may take ``metric_timeout_s`` per metric per
        record; past that the child (and its actor) is killed and the next batch gets a fresh one."""
        budget = metric_timeout_s * max(1, len(errors)) * max(1, len(records))
        with self._lock:
            reply, reason = self._exchange(records, budget)
        if reason is None and isinstance(reply, list) and len(reply) == len(records):
            return [[Score.model_validate(s) for s in scores] for scores in reply]
        reason = reason or f"scoring on Ray failed: {reply.get('error') if isinstance(reply, dict) else reply!r}"
        return [[make(reason, record.id) for make in errors] for record in records]

    def _exchange(self, records: Sequence[Record], budget: float) -> tuple[Any, str | None]:
        try:
            proc = self._process()
            _pipe(proc.stdin).write(json.dumps([r.model_dump_json() for r in records]).encode() + b"\n")
            _pipe(proc.stdin).flush()
        except Exception as error:
            return None, f"scoring on Ray failed: {error}"
        line = self._read_line(proc, budget)
        if not line:
            self._discard(proc)
            return None, ("the Ray scoring process died" if line == b"" else
                          f"timed out on Ray after {budget:g} s (metric_timeout_s per metric per record)")
        return json.loads(line), None


class LiveActor(BatchScorer):
    """The Ray actor behind a RayScorer: Records (JSON) in, each record's Scores (JSON-ready) out."""

    def ping(self) -> bool:
        return True

    def score(self, records: list[str]) -> list[list[dict[str, Any]]]:
        items = [Record.model_validate_json(text) for text in records]
        scored = score_items(self.evaluator, items, [None] * len(items), self.io_concurrency)
        return [[s.model_dump(mode="json") for s in row.scores] for row in scored]


def _serve(specs: list[list[Any]], address: str) -> None:
    from groundtrace.ray.cluster import connect

    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the protocol's own pipe ...
    os.dup2(2, 1)  # ... and whatever Ray prints goes to stderr, not into it
    try:
        ray = connect(address, "Monitor(isolation='ray')")
        actor = ray.remote(LiveActor).options(num_cpus=1, max_restarts=-1, max_task_retries=-1).remote(specs)
        ray.get(actor.ping.remote())  # the metrics are loaded before the parent hears "ready"
    except Exception as error:
        out.write(f"failed: {type(error).__name__}: {error}\n")
        out.flush()
        return
    out.write(_READY + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply: Any = ray.get(actor.score.remote(json.loads(line)))
        except Exception as error:  # the parent turns this into error Scores for the batch
            reply = {"error": f"{type(error).__name__}: {error}"}
        out.write(json.dumps(reply, ensure_ascii=False) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]), sys.argv[2])
