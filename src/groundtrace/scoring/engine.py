"""Evaluator: run several metrics over many records with bounded concurrency, in input order: the
local engine. Choosing between it and Ray is groundtrace.batch.stream's (Ray's engine builds on this one)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from groundtrace.config import Settings, default_metrics
from groundtrace.metrics import Metric, get_metric, metric_class
from groundtrace.privacy import Mask, load_mask, take_in
from groundtrace.record import InvalidRecord, Record, coerce_record, placeholder_record
from groundtrace.score import ScoredRecord

#: which metrics (by name) to run on a record; None: every selected metric
Selector = Callable[[Record], "Collection[str] | None"]


def _selected(
    metrics: Sequence[str | Metric] | str | None,
    options: Mapping[str, Mapping[str, Any]] | None,
    settings: Settings | None,
) -> list[str | Metric]:
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    metrics = list(metrics or default_metrics(settings))
    unknown = set(options or {}) - {m if isinstance(m, str) else m.name for m in metrics}
    if unknown:
        raise ValueError(f"options given for metrics that are not selected: {', '.join(sorted(unknown))}")
    return metrics


def build_metrics(
    metrics: Sequence[str | Metric] | str | None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Settings | None = None,
) -> list[Metric]:
    """Metric instances from names or instances; ``options`` maps a metric name to its keyword
    arguments. With no metrics, ``default_metrics(settings)`` (the environment's, without settings)."""
    options = options or {}
    return [get_metric(m, **options.get(m, {})) if isinstance(m, str) else m
            for m in _selected(metrics, options, settings)]


def metric_spec(metric: Metric, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(name, options) another process rebuilds the built ``metric`` from with ``build_metrics``: its options, and
    what it read where it was built that must not be read anew there (the combined metric's verdict)."""
    own = getattr(metric, "spec_options", None)
    return metric.name, dict(own(options or {}) if callable(own) else options or {})


def metric_specs(
    metrics: Sequence[str | Metric] | str | None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Settings | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """(name, options) of each metric, checked like :func:`build_metrics` but without building (or
    loading the model of) any: what another process needs to rebuild them with ``build_metrics``."""
    options = options or {}
    specs = []
    for metric in _selected(metrics, options, settings):
        if not isinstance(metric, str):
            raise ValueError(f"metric {metric.name!r} is an instance; another process can only rebuild metrics "
                             "given by name (pass its name, and its arguments as options)")
        metric_class(metric)  # an unknown name fails here, naming the available ones
        specs.append((metric, dict(options.get(metric, {}))))
    return specs


class Evaluator:
    """Scores records with every selected metric.

    ``workers`` threads score records concurrently (the numpy and regex work releases the GIL
    often enough to gain on more cores; judge metrics, later, gain most). Results come back in
    input order, and at most ``workers * 4`` records are in flight, so a file of any size streams.
    ``mask``: a function ``str -> str`` (or ``module:function``) applied to each record's question,
    contexts, answer and reference before any metric sees them; a record it fails on comes back with
    error Scores and its id only (see groundtrace.privacy).
    """

    def __init__(
        self,
        metrics: Sequence[str | Metric] | str | None = None,
        *,
        workers: int = 1,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        mask: Mask | str | None = None,
    ) -> None:
        self.metrics = build_metrics(metrics, options)
        self.workers = max(1, int(workers))
        self.mask = load_mask(mask)

    def score_one(self, item: Record | Mapping[str, Any] | Any, metrics: Sequence[Metric] | None = None,
                  select: Selector | None = None) -> ScoredRecord:
        """``item`` scored by ``metrics`` (default: all of this Evaluator's), of which ``select(record)``
        names those to run on this record (None: all)."""
        metrics = self.metrics if metrics is None else metrics
        item = take_in(item, self.mask)
        try:
            record = coerce_record(item)
        except InvalidRecord:
            record = placeholder_record(item)
            return ScoredRecord(record=record, scores=[m.score(item) for m in metrics])
        wanted = select(record) if select is not None else None
        if wanted is not None:
            metrics = [m for m in metrics if m.name in wanted]
        return ScoredRecord(record=record, scores=[m.score(record) for m in metrics])

    def iter_evaluate(
        self, records: Iterable[Any], on_result: Callable[[ScoredRecord], None] | None = None,
        select: Selector | None = None,
    ) -> Iterator[ScoredRecord]:
        if self.workers == 1:
            for item in records:
                result = self.score_one(item, select=select)
                if on_result:
                    on_result(result)
                yield result
            return
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="groundtrace") as pool:
            pending: deque[Future[ScoredRecord]] = deque()
            for item in records:
                pending.append(pool.submit(self.score_one, item, None, select))
                if len(pending) >= self.workers * 4:
                    yield self._done(pending.popleft(), on_result)
            while pending:
                yield self._done(pending.popleft(), on_result)

    @staticmethod
    def _done(future: Future[ScoredRecord], on_result: Callable[[ScoredRecord], None] | None) -> ScoredRecord:
        result = future.result()  # score_one never raises: metrics turn failures into error Scores
        if on_result:
            on_result(result)
        return result

    def evaluate(self, records: Iterable[Any]) -> list[ScoredRecord]:
        return list(self.iter_evaluate(records))

    async def aevaluate(self, records: Iterable[Any]) -> list[ScoredRecord]:
        return await asyncio.to_thread(self.evaluate, records)


def evaluate(
    records: Iterable[Any],
    metrics: Sequence[str | Metric] | str | None = None,
    *,
    workers: int = 1,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    mask: Mask | str | None = None,
) -> list[ScoredRecord]:
    """Score ``records`` (Records or mappings) with ``metrics`` (default: ``default_metrics()``, i.e. grounding);
    ``mask``: see :class:`Evaluator`."""
    return Evaluator(metrics, workers=workers, options=options, mask=mask).evaluate(records)
