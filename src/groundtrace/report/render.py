"""Scored records -> one self-contained HTML page (inline CSS, JS and SVG; nothing fetched)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from groundtrace.io import read_scored
from groundtrace.report.compare import compare
from groundtrace.report.conversations import conversations
from groundtrace.report.evidence import Evidence, claim_views
from groundtrace.report.labels import gold_of, load_labels
from groundtrace.report.records import record_view
from groundtrace.report.templates import environment
from groundtrace.report.summary import failures, metric_names, slowest, summarize
from groundtrace.report.trace_links import check_template, trace_link
from groundtrace.report.views import views_data
from groundtrace.score import ScoredRecord

OPEN_UP_TO = 50  # records shown unfolded when the file has at most this many


def render_report(rows: Sequence[ScoredRecord], *, labelled: Mapping[str, Mapping[str, Any]] | None = None,
                  source: str = "scores", trace_url: str | None = None, evidence: Evidence | None = None,
                  baseline: Sequence[ScoredRecord] | None = None, baseline_source: str = "baseline") -> str:
    """The page for ``rows``; ``labelled`` (rows of a labelled file by id) adds gold labels and spans;
    ``trace_url`` a link per record (groundtrace.report.trace_links); ``evidence`` each flagged claim's
    passages (groundtrace.report.evidence); ``baseline`` another run of the same records, compared."""
    return _page(rows, labelled, source, trace_url, evidence, baseline, baseline_source)[0]


def _page(rows: Sequence[ScoredRecord], labelled: Mapping[str, Mapping[str, Any]] | None, source: str,
          trace_url: str | None = None, evidence: Evidence | None = None,
          baseline: Sequence[ScoredRecord] | None = None, baseline_source: str = "baseline") -> tuple[str, int]:
    if trace_url:
        check_template(trace_url)  # a bad template fails before any work
    golds = [gold_of(row, labelled) for row in rows]
    metrics = metric_names(rows)
    records = [record_view(i, row, metrics, gold, trace_link(trace_url, row))
               for i, (row, gold) in enumerate(zip(rows, golds, strict=True))]
    if evidence is not None:
        for view in records:
            if view.flagged:
                view.claims = claim_views(view.row, evidence(view.row, view.language or "en"))
    labels = [g.label if g is not None else None for g in golds]
    with_labels = sum(label is not None for label in labels)
    comparison = None
    if baseline is not None:
        comparison = compare(baseline, rows, {row.id: label for row, label in zip(rows, labels, strict=True)
                                              if row.id is not None and label is not None})
    html = environment().get_template("report.html.j2").render(
        source=source,
        metrics=metrics,
        summaries=summarize(rows, golds),
        conversations=conversations(rows, metrics),
        records=records,
        flagged=sum(1 for r in records if r.flagged),
        labelled=with_labels,
        slowest=slowest(rows),
        failures=failures(rows),
        open_records=len(rows) <= OPEN_UP_TO,
        views=views_data(rows, labels, trace_url=trace_url),
        traced=any(r.trace for r in records),
        comparison=comparison,
        baseline_source=baseline_source,
        baseline=baseline or [],
    )
    return html, with_labels


class Written(NamedTuple):
    path: Path
    records: int
    labelled: int


def write_report(scores: str | Path, output: str | Path | None = None, *, labels: str | Path | None = None,
                 schema: str | None = None, labelled: Mapping[str, Mapping[str, Any]] | None = None,
                 trace_url: str | None = None, evidence: Evidence | None = None,
                 compare_with: str | Path | None = None) -> Written:
    """Render ``scores`` (JSONL of ScoredRecord) to ``output`` (default: beside it, as .html); ``labels``:
    the labelled file that was scored, in the layout ``schema`` names (default: detected), or
    ``labelled``: its rows by id already read; ``compare_with``: another run's scores of the same
    records (before a change): the page shows what changed from it. See :func:`render_report`."""
    scores = Path(scores)
    if labels is not None:
        labelled = load_labels(labels, schema)  # a wrong layout fails before reading scores
    if trace_url:
        check_template(trace_url)
    rows = list(read_scored(scores))
    baseline = list(read_scored(compare_with)) if compare_with is not None else None
    path = Path(output) if output is not None else scores.with_suffix(".html")
    path.parent.mkdir(parents=True, exist_ok=True)
    html, with_labels = _page(rows, labelled, scores.name, trace_url, evidence, baseline,
                              Path(compare_with).name if compare_with is not None else "baseline")
    path.write_text(html, encoding="utf-8")
    return Written(path, len(rows), with_labels)
