"""score_records and score_dataset: Ray Data ``map_batches`` over a pool of actors that load the
metrics once.

Streaming: an iterable is read in windows of ``window`` inputs; each window is one Ray Dataset
scored by a fresh actor pool, so the driver holds at most one window of inputs and results, and
a file of any length streams. Exactly once: every row carries its position; the driver keeps the
first result for each position, drops any repeat (a batch retried after its actor died), rescores
the positions a failed run left unscored (``attempts`` times), and gives what is still missing an
error Score, so every input comes back once, in input order.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from groundtrace.scoring.engine import Selector, metric_specs
from groundtrace.metrics import Metric, metric_class
from groundtrace.ray.batch import BatchScorer
from groundtrace.ray.cluster import connect
from groundtrace.ray.rows import decode, key_of, row
from groundtrace.record import placeholder_record
from groundtrace.redaction import get_logger
from groundtrace.score import ScoredRecord

log = get_logger("groundtrace.ray")

# A killed actor comes back and its batch runs again (Ray's own retries); the driver's exactly-once
# bookkeeping makes the rerun harmless. These are Ray Data 2.60's defaults for actor pools too; they
# are given anyway so that a change of default cannot turn a killed actor into a failed run.
ACTOR_OPTIONS = {"max_restarts": -1, "max_task_retries": -1}


def _scored(ds: Any, specs: list[tuple[str, dict[str, Any]]], *, actors: int, batch_size: int,
            io_concurrency: int, records_in: bool = False, select: Selector | None = None) -> Any:
    """The lazy Dataset of scored rows (position, key, scored), from rows (position, key, item,
    select) or, with ``records_in``, from record dicts."""
    from ray.data import ActorPoolStrategy

    with warnings.catch_warnings():  # Ray 2.60 deprecates extra remote args (for 2.64), this pin still takes them
        warnings.filterwarnings("ignore", message=".*ray_remote_args. is deprecated")
        return ds.map_batches(
            BatchScorer, fn_constructor_kwargs={"specs": specs, "io_concurrency": io_concurrency,
                                               "records_in": records_in, "select": select},
            compute=ActorPoolStrategy(size=max(1, int(actors))), batch_size=max(1, int(batch_size)), batch_format="numpy",
            num_cpus=1, **ACTOR_OPTIONS,
        )


def score_records(
    items: Iterable[Any],
    metrics: Sequence[str | Metric] | str | None = None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    address: str | None = None,
    actors: int = 2,
    batch_size: int = 64,
    select: Selector | None = None,
    on_result: Callable[[ScoredRecord], None] | None = None,
    skip: Container[str] | None = None,
    window: int | None = None,
    io_concurrency: int = 16,
    attempts: int = 3,
) -> Iterator[ScoredRecord]:
    """Score ``items`` on Ray; yields one ScoredRecord per input, in input order.

    ``items``: Records, mappings, or what :func:`groundtrace.io.read_jsonl` yields (a corrupt line's
    InvalidInput becomes an error row). ``metrics``: names (actors rebuild them with
    ``build_metrics``), ``options`` their arguments. ``address``: None/"local" starts a local
    cluster sized to this machine; "auto" or "ray://HOST:PORT" joins an existing one. ``actors``
    scoring actors of one CPU each take ``batch_size`` records at a time. ``select(record)`` names
    the metrics one record gets (None: all), decided here on the driver. ``on_result`` sees each
    result as it arrives (progress). ``skip``: keys to leave out (resume: the ids already written);
    a key is the record's id, else ``item-N`` for the N-th input (1-based), which is also the
    ScoredRecord's id. ``window``: inputs held at once (default ``actors * batch_size * 32``).
    """
    specs = metric_specs(metrics, options)
    ray = connect(address)
    size = max(1, int(window or max(1, actors) * max(1, batch_size) * 32))
    numbered = ((n, item) for n, item in enumerate(items, start=1) if not (skip and key_of(item, n) in skip))
    while chunk := list(islice(numbered, size)):
        rows = {n: row(n, item, select) for n, item in chunk}
        del chunk
        ready: dict[int, ScoredRecord] = {}
        order = iter(sorted(rows))
        expected = next(order, None)
        for position, scored in _window(ray, rows, specs, actors, batch_size, io_concurrency, attempts):
            if on_result:
                on_result(scored)
            ready[position] = scored
            while expected is not None and expected in ready:  # release the in-order prefix
                yield ready.pop(expected)
                expected = next(order, None)


def _window(ray: Any, rows: dict[int, dict[str, Any]], specs: list[tuple[str, dict[str, Any]]], actors: int,
            batch_size: int, io_concurrency: int, attempts: int) -> Iterator[tuple[int, ScoredRecord]]:
    """(position, ScoredRecord) for every row exactly once, in arrival order."""
    pending = dict(rows)
    failure: Exception | None = None
    for attempt in range(1, max(1, attempts) + 1):
        if not pending:
            return
        blocks = -(-len(pending) // max(1, batch_size))  # one block per batch, not one per record
        source = ray.data.from_items(list(pending.values()), override_num_blocks=blocks)
        dataset = _scored(source, specs, actors=actors, batch_size=batch_size, io_concurrency=io_concurrency)
        outputs = iter(dataset.iter_rows())
        try:
            for out in outputs:
                position = int(out["position"])
                if pending.pop(position, None) is not None:  # a repeat (a retried batch) is dropped
                    yield position, ScoredRecord.model_validate_json(out["scored"])
        except Exception as error:  # an actor that never came back, a lost node: rescore what is missing
            failure = error
            log.warning("groundtrace: ray run %d of %d stopped (%s); %d records left to score",
                        attempt, attempts, error, len(pending))
        finally:  # a consumer that stops early must not leave the actors holding their CPUs
            getattr(outputs, "close", lambda: None)()
    for position, left in pending.items():
        yield position, _unscored(left, specs, f"not scored after {attempts} attempts on Ray: {failure}")


def _unscored(left: Mapping[str, Any], specs: list[tuple[str, dict[str, Any]]], message: str) -> ScoredRecord:
    item = decode(left["item"])
    return ScoredRecord(id=left["key"], record=placeholder_record(item),
                        scores=[metric_class(name).error(message, left["key"]) for name, _ in specs])


def score_dataset(
    ds: Any,
    metrics: Sequence[str | Metric] | str | None = None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    address: str | None = None,
    actors: int = 2,
    batch_size: int = 64,
    select: Selector | None = None,
    io_concurrency: int = 16,
) -> Any:
    """A lazy Ray Dataset of scored rows for a Ray Dataset of record dicts: columns ``key`` (the
    record's id, else a digest of the row, since a distributed Dataset has no stable position) and
    ``scored`` (the ScoredRecord as JSON: ``ScoredRecord.model_validate_json(row["scored"])``).
    Ray's own retries rerun the batch of an actor that died; rows are not deduplicated here."""
    specs = metric_specs(metrics, options)
    connect(address)
    # the actors turn record dicts into rows themselves: no extra stage of tasks competing for CPUs
    return _scored(ds, specs, actors=actors, batch_size=batch_size, io_concurrency=io_concurrency,
                   records_in=True, select=select).select_columns(["key", "scored"])
