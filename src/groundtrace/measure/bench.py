"""Meta-evaluation: how well does a metric separate hallucinated from faithful answers?

Reads labelled JSONL (``label`` 1 = hallucinated, as in shared/data), scores every record, and
reports precision, recall and F1 of the hallucinated class at a threshold, ROC AUC, balanced
accuracy and throughput, overall and per task and language.

The threshold is, in order: one given by the caller; one fitted (F1-optimal) on another labelled
file; the metric's documented default. The F1-optimal threshold on the same file is reported too,
as ``oracle``, and is optimistic by construction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from groundtrace.batch.stream import preflight, score_stream
from groundtrace.io import read_layout
from groundtrace.io.labelled import (
    Labelled,
    load_labelled,
)
from groundtrace.measure.classification import best_f1_threshold, confusion, roc_auc
from groundtrace.measure.provenance import records_sha256, trained_on, training_file
from groundtrace.metrics import Metric
from groundtrace.score import Score
from groundtrace.scoring.engine import build_metrics


def _reset_caches(metric: Metric) -> None:
    """Throughput is measured cold: nothing a previous run embedded is reused."""
    reset = getattr(metric, "reset_caches", None)
    if reset is not None:
        reset()
    embedder = getattr(metric, "embedder", None)
    if embedder is not None and hasattr(embedder, "clear_cache"):
        embedder.clear_cache()


def score_all(metric: Metric, items: Sequence[Labelled], progress: Callable[[], None] | None = None,
              engine: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None) -> tuple[list[Score], float]:
    """``metric``'s Scores of ``items``, in order, and the seconds they took. ``engine``: the keywords
    of :func:`groundtrace.batch.stream.score_stream` (default: this process, with ``metric`` itself); on
    Ray the actors rebuild the metric from its name and ``options``, and the seconds include their start."""
    if engine and engine.get("engine", "local") != "local":
        started = time.perf_counter()
        rows = score_stream([i.raw for i in items], [metric.name], options={metric.name: options} if options else None,
                            on_result=(lambda _: progress()) if progress else None, **engine)
        scores = [row.scores[0] for row in rows]
        return scores, time.perf_counter() - started
    _reset_caches(metric)
    metric.score({"answer": "warm up", "contexts": ["warm up"]})  # load models outside the timing
    started = time.perf_counter()
    scores = []
    for item in items:
        scores.append(metric.score(item.raw))
        if progress:
            progress()
    return scores, time.perf_counter() - started


def record_id(item: Labelled) -> str:
    return str(item.raw.get("id") or "")


@dataclass
class Found:
    """A metric's Scores of some records, in their order: ``read`` of them taken from a scores file, the rest
    scored here in ``seconds`` (None when none was)."""
    scores: list[Score]
    read: int
    seconds: float | None


def scores_for(metric: Metric, items: Sequence[Labelled], stored: Mapping[str, Mapping[str, Score]] | None = None,
               progress: Callable[[], None] | None = None, engine: Mapping[str, Any] | None = None,
               options: Mapping[str, Any] | None = None) -> Found:
    """``metric``'s Score of each item: the one ``stored`` holds for the record's id and the metric's name (a
    scores file's, see :func:`groundtrace.score.scores_by_id`), else scored here (only those)."""
    have: list[Score | None] = [(stored or {}).get(record_id(item), {}).get(metric.name) for item in items]
    missing = [i for i, score in enumerate(have) if score is None]
    seconds = None
    if missing:
        fresh, seconds = score_all(metric, [items[i] for i in missing], progress, engine, options)
        for i, score in zip(missing, fresh, strict=True):
            have[i] = score
    return Found([score for score in have if score is not None], len(items) - len(missing), seconds)


def oriented(scores: Sequence[Score]) -> np.ndarray:
    """Hallucination-oriented values (higher = more hallucinated); NaN marks a failed score."""
    return np.array([np.nan if s.hallucination_score is None else s.hallucination_score for s in scores])


def fit_threshold(metric: Metric, items: Sequence[Labelled], engine: Mapping[str, Any] | None = None,
                  options: Mapping[str, Any] | None = None) -> float:
    """The F1-optimal threshold of ``metric`` on ``items``, on the metric's own scale."""
    scores, _ = score_all(metric, items, engine=engine, options=options)
    return _fitted_on(metric, [i.label for i in items], oriented(scores))


def _fitted_on(metric: Metric, labels: ArrayLike, h: np.ndarray) -> float:
    ok = ~np.isnan(h)
    cut = best_f1_threshold(np.asarray(labels)[ok], h[ok])
    # predicted hallucinated when h >= cut; on the metric's scale that is value <= 1 - cut for a
    # higher-is-better metric, i.e. value < the next number above 1 - cut
    return float(np.nextafter(1.0 - cut, 2.0)) if metric.higher_is_better else cut


@dataclass
class Stats:
    n: int
    errors: int
    auc: float | None
    precision: float
    recall: float
    f1: float
    balanced_accuracy: float | None
    positives: int
    records_per_s: float | None = None  # from the metric's own latencies, for a group of records

    @classmethod
    def of(cls, labels: np.ndarray, h: np.ndarray, predicted: np.ndarray, latency_ms: np.ndarray | None = None) -> Stats:
        ok = ~np.isnan(h)
        c = confusion(labels[ok], predicted[ok])
        spent = float(np.nansum(latency_ms)) / 1000.0 if latency_ms is not None else 0.0
        return cls(int(ok.sum()), int((~ok).sum()), roc_auc(labels[ok], h[ok]), c.precision, c.recall, c.f1,
                   c.balanced_accuracy, c.tp + c.fn, len(labels) / spent if spent > 0 else None)


@dataclass
class BenchResult:
    metric: str
    higher_is_better: bool
    threshold: float
    threshold_source: str
    overall: Stats
    records_per_s: float | None  # None when every score was read from a scores file
    latency_ms: dict[str, float]
    oracle: dict[str, float]
    groups: dict[str, Stats] = field(default_factory=dict)
    first_errors: list[str] = field(default_factory=list)
    spans: dict[str, float] | None = None  # character-overlap precision/recall/F1 against gold spans
    scores: list[Score] = field(default_factory=list, repr=False)
    labels: list[int] = field(default_factory=list, repr=False)
    #: the training file of the metric this file is (see groundtrace.measure.provenance): its numbers are in-sample
    trained_on: dict[str, str] | None = None
    #: how many of the scores were read from a scores file rather than scored here
    read: int = 0

    @property
    def in_sample(self) -> bool:
        return self.trained_on is not None

    def as_dict(self) -> dict[str, Any]:
        o = self.overall
        return {
            "n": o.n,
            "errors": o.errors,
            "positives": o.positives,
            "auc": o.auc,
            "f1": o.f1,
            "precision": o.precision,
            "recall": o.recall,
            "balanced_accuracy": o.balanced_accuracy,
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "higher_is_better": self.higher_is_better,
            "records_per_s": self.records_per_s,
            "scores_read": self.read,
            "latency_ms": self.latency_ms,
            "oracle": self.oracle,
            "groups": {name: vars(stats) for name, stats in self.groups.items()},
            "spans": self.spans,
            "first_errors": self.first_errors,
            "in_sample": self.in_sample,
            "trained_on": self.trained_on,
        }


def span_overlap(items: Sequence[Labelled], scores: Sequence[Score], predicted: np.ndarray) -> dict[str, float] | None:
    """Character-level precision, recall and F1 of predicted against gold spans, micro-averaged.

    Counted over the records whose gold spans are known: faithful answers (no gold characters, so
    every predicted one is a false positive) and hallucinated ones with spans. A record's predicted
    characters are the spans of its Score when the Score is a hallucinated verdict at the bench
    threshold. None when the file has no spans or the metric never points at text."""
    if not any(i.raw.get("spans") for i in items) or not any(s.spans for s in scores):
        return None
    tp = fp = fn = records = 0
    for item, score, flagged in zip(items, scores, predicted, strict=True):
        gold_spans = item.raw.get("spans") or []
        if item.label == 1 and not gold_spans:
            continue
        records += 1
        gold = {c for s in gold_spans for c in range(int(s["start"]), int(s["end"]))}
        guess = {c for s in score.spans for c in range(s.start, s.end)} if flagged else set()
        tp += len(gold & guess)
        fp += len(guess - gold)
        fn += len(gold - guess)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "records": records}


def _speed(scored: int, seconds: float | None) -> float | None:
    if seconds is None:
        return None
    return scored / seconds if seconds > 0 else float("inf")


def _predictions(metric: Metric, values: Sequence[float | None], threshold: float) -> np.ndarray:
    return np.array([v is not None and metric.verdict(v, threshold) for v in values])


def bench_metric(
    metric: Metric,
    items: Sequence[Labelled],
    *,
    threshold: float | None = None,
    threshold_source: str | None = None,
    progress: Callable[[], None] | None = None,
    engine: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    stored: Mapping[str, Mapping[str, Score]] | None = None,
) -> BenchResult:
    if threshold is None:
        threshold, threshold_source = metric.threshold, "metric default"
    found = scores_for(metric, items, stored, progress, engine, options)
    scores = found.scores
    labels = np.array([i.label for i in items])
    h = oriented(scores)
    values = [s.value for s in scores]
    latency = np.array([np.nan if s.latency_ms is None else s.latency_ms for s in scores])
    predicted = _predictions(metric, values, threshold)
    groups = {}
    for key in sorted({f"{k}:{v}" for i in items for k, v in i.groups.items()}):
        name, value = key.split(":", 1)
        mask = np.array([i.groups.get(name) == value for i in items])
        groups[key] = Stats.of(labels[mask], h[mask], predicted[mask], latency[mask])
    ok = ~np.isnan(h)
    latencies = np.array([s.latency_ms for s in scores if s.latency_ms is not None])
    oracle_cut = _fitted_on(metric, labels, h) if ok.any() else threshold
    oracle_pred = _predictions(metric, values, oracle_cut)
    return BenchResult(
        metric=metric.name,
        higher_is_better=metric.higher_is_better,
        threshold=float(threshold),
        threshold_source=threshold_source or "given",
        overall=Stats.of(labels, h, predicted),
        records_per_s=_speed(len(items) - found.read, found.seconds),
        read=found.read,
        latency_ms={
            "mean": float(latencies.mean()) if len(latencies) else 0.0,
            "p50": float(np.percentile(latencies, 50)) if len(latencies) else 0.0,
            "p95": float(np.percentile(latencies, 95)) if len(latencies) else 0.0,
        },
        oracle={"threshold": oracle_cut, "f1": Stats.of(labels, h, oracle_pred).f1},
        groups=groups,
        spans=span_overlap(items, scores, predicted),
        first_errors=[s.error for s in scores if s.error][:3],
        scores=scores,
        labels=labels.tolist(),
    )


def run_bench(
    path: str | Path | None,
    metrics: Sequence[str | Metric] | str,
    *,
    threshold: float | None = None,
    threshold_from: str | Path | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    limit: int | None = None,
    progress: Callable[[str, int], Callable[[], None] | None] | None = None,
    engine: Mapping[str, Any] | None = None,
    schema: str | None = None,
    by: Sequence[str] = (),
    items: Sequence[Labelled] | None = None,
    stored: Mapping[str, Mapping[str, Score]] | None = None,
) -> dict[str, BenchResult]:
    """Bench every metric on ``path``, or on ``items`` already labelled (records joined with a labels
    file, read from a platform with its human labels; ``path``, when given, is still the file they came
    from); ``progress(metric_name, total)`` may return a tick callback.
    ``by``: row keys to break the figures down by besides task and language ('session': session_id).
    ``engine``: where the records are scored, as keywords of :func:`groundtrace.batch.stream.score_stream`
    (e.g. ``{"engine": "ray", "actors": 2}``; default: this process). ``schema``: the layout of both
    files (default: detected from each file's keys). ``stored``: Scores already computed with these settings, record id ->
    metric name -> Score (:func:`groundtrace.io.labelled.stored_scores` of a scores file, which leaves out a metric
    given options): each metric reuses them and scores only the records they lack."""
    if threshold is not None and threshold_from is not None:
        raise ValueError("give either a threshold or a file to fit one on, not both")
    if items is None:
        if path is None:
            raise ValueError("bench needs a labelled file or labelled records")
        items = load_labelled(path, limit, schema, by)
    reference = load_labelled(threshold_from, limit, schema) if threshold_from else None
    results = {}
    built = build_metrics(metrics, options)
    # the whole file, not the first ``limit`` records: a part of a training file is in-sample too
    digest = None
    if any(trained_on(m) for m in built):
        digest = records_sha256(read_layout(path, schema).rows if path is not None else [i.raw for i in items])
    # a model that is not there (or, scoring here, does not load) stops the bench before the first record
    preflight(built, load=not engine or engine.get("engine", "local") == "local")
    for metric in built:
        cut, source = threshold, ("given" if threshold is not None else None)
        if reference is not None and threshold_from is not None:
            cut = fit_threshold(metric, reference, engine, (options or {}).get(metric.name))
            source = f"F1-optimal on {Path(threshold_from).name}"
        tick = progress(metric.name, len(items)) if progress else None
        results[metric.name] = bench_metric(metric, items, threshold=cut, threshold_source=source, progress=tick,
                                            engine=engine, options=(options or {}).get(metric.name), stored=stored)
        results[metric.name].trained_on = training_file(metric, digest) if digest else None
    return results
