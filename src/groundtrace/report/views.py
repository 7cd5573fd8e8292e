"""The views the HTML report and ``groundtrace review`` share: a threshold what-if per metric,
breakdowns, two runs compared and a trace link per record.

Python (the numbers; tests and servers use them):

- :func:`confusion_at` ``(rows, metric, threshold=None, labels=None) -> dict``: flagged share and,
  against labels, the confusion cells, precision, recall, F1, balanced accuracy and AUC, as
  ``groundtrace bench`` computes them at that threshold (groundtrace.report.rates);
- :func:`breakdown` ``(rows, key, labels=None, thresholds=None) -> list[dict]``: the same per group of
  ``language``, ``session``, ``day`` or ``metadata.KEY`` (groundtrace.report.groups);
- :func:`compare` ``(rows_a, rows_b, labels=None) -> dict``: per record and per metric, what changed
  between two runs (groundtrace.report.compare);
- :func:`trace_link` ``(template, record) -> str | None`` (groundtrace.report.trace_links).

``labels`` is ``{record id: 0/1}`` (1 = unsupported: what ``review.labels.read_labels`` returns) or
one 0/1/None per row.

The page (all client-side, nothing fetched): ``views.html.j2`` is a Jinja partial that draws the
threshold sliders with their confusion cells and the breakdown table from one JSON blob,
:func:`views_data`; its script (``views.js.j2``) repeats rates.py's arithmetic, and every text it
shows is set as text, never as markup. To embed it in another page::

    from groundtrace.report.views import views_data, views_html
    html = views_html(rows, labels, trace_url=template)   # markup, style, data and script in one piece
    # in a Jinja template: {{ views_section | safe }}; or, with the report's loader, render the
    # partial yourself: {% include "views.html.j2" %} with ``views`` = views_data(...) in the context

The partial talks to its page through DOM events on ``document``:

- it sends ``groundtrace:select`` with ``detail = {rows: [row index, ...] | null, title}`` when a
  confusion cell or a group is clicked (null: the selection was cleared): show those records;
- it sends ``groundtrace:threshold`` with ``detail = {metric, threshold, flagged: [bool | null per row]}``
  when a slider moves: re-mark the verdicts the page shows, if it shows them;
- it keeps its state in the URL fragment (``t.METRIC=0.35``, ``by=language``, ``by.metric=grounding``,
  ``cell=grounding.fp``) beside the page's own keys, so a view can be linked to.

Row indices are positions in ``rows``, the order the page must list its records in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from groundtrace.report.compare import compare
from groundtrace.report.groups import breakdown, group_keys, group_of
from groundtrace.report.rates import Labels, aligned, confusion_at, default_threshold, direction
from groundtrace.report.trace_links import check_template, trace_link
from groundtrace.score import ScoredRecord


def views_data(rows: Sequence[ScoredRecord], labels: Labels = None, *, trace_url: str | None = None) -> dict[str, Any]:
    """The JSON blob the partial draws from: per metric its direction and default threshold; per row
    its id, label, groups, values (null: the metric failed; absent: not scored by it) and trace link."""
    if trace_url:
        check_template(trace_url)
    metrics = list(dict.fromkeys(s.metric for row in rows for s in row.scores))
    keys = group_keys(rows)
    row_labels = aligned(rows, labels)
    return {
        "metrics": [{"name": m, "higher_is_better": direction(rows, m), "threshold": default_threshold(rows, m)}
                    for m in metrics],
        "group_keys": keys,
        "labelled": sum(label is not None for label in row_labels),
        "rows": [{
            "id": row.id,
            "label": label,
            "groups": {key: group_of(row, key) for key in keys},
            "scores": {s.metric: s.value for s in row.scores},
            "trace": trace_link(trace_url, row),
        } for row, label in zip(rows, row_labels, strict=True)],
    }


def views_html(rows: Sequence[ScoredRecord], labels: Labels = None, *, trace_url: str | None = None) -> Markup:
    """The partial rendered: a <section> with its style, data and script, to put in any page."""
    from groundtrace.report.templates import environment  # the report's templates and filters

    return Markup(environment().get_template("views.html.j2").render(views=views_data(rows, labels, trace_url=trace_url)))


__all__ = ["breakdown", "compare", "confusion_at", "trace_link", "views_data", "views_html"]
