"""What an actor does with a batch: score each input with its selected metrics.

CPU-bound metrics score one record after another (the actor owns its core); metrics that wait on
an endpoint (``waits_on_io``: the LLM judges) score the whole batch at once through ``ascore``,
at most ``io_concurrency`` requests in flight.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from typing import Any

from groundtrace.scoring.engine import Evaluator, Selector
from groundtrace.metrics import Metric
from groundtrace.ray.rows import decode, rows_from_records
from groundtrace.score import Score, ScoredRecord


def chosen(metrics: Sequence[Metric], selection: str | None) -> list[Metric]:
    """The metrics a row's selection names ("" or None: all)."""
    if not selection:
        return list(metrics)
    names = set(json.loads(selection))
    return [m for m in metrics if m.name in names]


def score_items(evaluator: Evaluator, items: Sequence[Any], selections: Sequence[str | None],
                io_concurrency: int = 16) -> list[ScoredRecord]:
    per_item = [chosen(evaluator.metrics, s) for s in selections]
    results = [evaluator.score_one(item, [m for m in ms if not m.waits_on_io]) for item, ms in zip(items, per_item, strict=True)]
    waiting = [(i, m) for i, ms in enumerate(per_item) for m in ms if m.waits_on_io]
    if waiting:
        io_scores = asyncio.run(_gather(items, waiting, io_concurrency))
        extra: dict[int, list[Score]] = {}
        for (i, _), score in zip(waiting, io_scores, strict=True):
            extra.setdefault(i, []).append(score)
        for i, ms in enumerate(per_item):
            if i in extra:  # back into the metrics' order
                by_name = {s.metric: s for s in results[i].scores + extra[i]}
                results[i] = results[i].model_copy(update={"scores": [by_name[m.name] for m in ms]})
    return results


async def _gather(items: Sequence[Any], waiting: Sequence[tuple[int, Metric]], bound: int) -> list[Score]:
    gate = asyncio.Semaphore(max(1, bound))
    # ascore runs the metric in the loop's default executor, whose few threads (cores + 4) would
    # otherwise cap the bound; asyncio.run shuts this one down with the loop
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max(1, bound), "groundtrace-io"))

    async def one(i: int, metric: Metric) -> Score:
        async with gate:
            return await metric.ascore(items[i])

    return await asyncio.gather(*(one(i, m) for i, m in waiting))


class BatchScorer:
    """The Ray Data callable class: builds the metrics once per actor, then scores batches of rows
    (columns position, key, item, select) into rows (position, key, scored: a ScoredRecord as JSON).
    With ``records_in``, batches of record dicts, which it makes into rows first (``select`` runs here)."""

    def __init__(self, specs: Sequence[tuple[str, Mapping[str, Any]]], io_concurrency: int = 16,
                 records_in: bool = False, select: Selector | None = None) -> None:
        self.evaluator = Evaluator([name for name, _ in specs], options={n: o for n, o in specs if o})
        for metric in self.evaluator.metrics:  # an actor loads its models once, when it starts
            metric.warm_up()
        self.io_concurrency = io_concurrency
        self.records_in = records_in  # batches of record dicts (score_dataset) rather than rows
        self.select = select

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        if self.records_in:
            batch = rows_from_records(batch, self.select)
        items = [decode(text) for text in batch["item"]]
        scored = score_items(self.evaluator, items, list(batch["select"]), self.io_concurrency)
        return {"position": batch["position"], "key": batch["key"],
                "scored": [row.model_copy(update={"id": str(key)}).model_dump_json() for row, key in zip(scored, batch["key"], strict=True)]}
