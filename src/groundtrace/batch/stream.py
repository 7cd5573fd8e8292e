"""Batch scoring on the chosen engine: :func:`score_stream`, the one place the command line, the bench
and any other batch path choose between this process (groundtrace.scoring.engine's Evaluator) and a Ray
cluster (groundtrace.ray, imported only when chosen).

It sits above both: the Ray engine builds on the local one, and neither imports this module, so
choosing an engine by name makes no circle between them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from groundtrace.scoring.engine import Evaluator, Selector, build_metrics
from groundtrace.metrics import Metric
from groundtrace.privacy import Mask, load_mask, masked_items
from groundtrace.score import ScoredRecord

ENGINES = ("local", "ray")


def score_stream(
    items: Iterable[Any],
    metrics: Sequence[str | Metric] | str | None = None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    engine: str = "local",
    workers: int = 1,
    on_result: Callable[[ScoredRecord], None] | None = None,
    select: Selector | None = None,
    mask: Mask | str | None = None,
    **ray_options: Any,
) -> Iterator[ScoredRecord]:
    """Score ``items`` on the chosen engine, in input order.

    ``engine="local"`` (default): an :class:`~groundtrace.scoring.engine.Evaluator` with ``workers`` threads.
    ``engine="ray"``: :func:`groundtrace.ray.score_records`, which takes ``ray_options`` (``address``,
    ``actors``, ``batch_size``, ...) and metrics by name only. ``select(record)``: the metrics to run on
    a record. ``mask``: applied here, on this machine, before any engine sees a record (see
    :class:`~groundtrace.scoring.engine.Evaluator`)."""
    if engine == "local":
        if ray_options:
            raise ValueError(f"{', '.join(sorted(ray_options))}: options of the ray engine, not of the local one")
        evaluator = Evaluator(metrics, workers=workers, options=options, mask=mask)
        preflight(evaluator.metrics, load=True)
        return evaluator.iter_evaluate(items, on_result, select)
    if engine == "ray":
        from groundtrace.ray import score_records

        preflight(build_metrics(metrics, options))  # built here only to ask: no model is loaded
        return score_records(masked_items(items, load_mask(mask)), metrics, options=options, on_result=on_result,
                             select=select, **ray_options)
    raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def preflight(metrics: Sequence[Metric], load: bool = False) -> None:
    """Ask each metric whether it can run here at all (a model that is missing, an extra not installed):
    a batch stops before its first record with the metric's one clear error, rather than giving every record
    the same error Score. ``load``: also load the models (a model that is there but broken stops it too, and
    no record's latency includes the load); for the engine that scores in this process."""
    for metric in metrics:
        metric.preflight()
    if load:
        for metric in metrics:
            metric.prepare()
