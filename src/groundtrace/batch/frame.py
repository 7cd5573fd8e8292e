"""``groundtrace.score_frame``: score the rows of a pandas DataFrame, in any layout of groundtrace.io.layouts.

pandas is optional (``pip install 'groundtrace[pandas]'``) and imported only when a frame is scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from groundtrace._extras import missing_extra
from groundtrace.scoring.engine import Evaluator
from groundtrace.io import map_rows
from groundtrace.metrics import Metric
from groundtrace.score import Score

if TYPE_CHECKING:
    import pandas as pd

COLUMN_SUFFIXES = ("", "_flagged", "_reason", "_spans")


def _plain(value: Any, pd: Any) -> Any:
    """A cell as the plain Python value a Record takes: numpy arrays (a list column read from Parquet)
    as lists, numpy scalars as numbers, and pandas' missing markers (NaN, NaT, NA, None) as None."""
    if isinstance(value, (list, tuple)) or getattr(value, "ndim", None):
        return [_plain(item, pd) for item in value]
    if isinstance(value, (str, dict)):
        return value
    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def score_frame(
    df: pd.DataFrame,
    metrics: Sequence[str | Metric] | str | None = None,
    *,
    schema: str | None = None,
    workers: int = 1,
    **options: Mapping[str, Any],
) -> pd.DataFrame:
    """``df`` with four columns per metric: ``<metric>`` (the value, pandas' nullable Float64: ``<NA>``,
    never NaN, where the metric could not score the row), ``<metric>_flagged`` (nullable boolean: the
    verdict at the metric's threshold), ``<metric>_reason`` (the reason, or the error) and
    ``<metric>_spans`` (the flagged spans of the answer: dicts with start, end, text, label).

    The rows may be in any layout groundtrace reads (its own fields, RAGAS, DeepEval; ``schema``
    forces one, else it is detected from the columns that hold values; a frame in no layout or in two
    raises :class:`~groundtrace.io.layouts.LayoutError` before anything is scored). ``metrics``: names or
    instances (default: grounding); ``options``: each metric's keyword arguments, by metric name, e.g.
    ``score_frame(df, ["facts"], facts={"threshold": 0.4})``. A new frame is returned; ``df`` is unchanged."""
    try:
        import pandas as pd
    except ImportError as error:
        raise missing_extra("pandas", "groundtrace.score_frame", error) from None
    rows = [{str(key): _plain(value, pd) for key, value in row.items()} for row in df.to_dict(orient="records")]
    mapped = map_rows(rows, schema, where="the DataFrame's rows").rows
    evaluator = Evaluator(metrics, workers=workers, options=options)
    scored = list(evaluator.iter_evaluate(mapped))
    result = df.copy()
    for position, metric in enumerate(evaluator.metrics):
        scores = [row.scores[position] for row in scored]  # each row has one Score per metric, in this order
        for suffix, values, dtype in _columns(scores):
            result[metric.name + suffix] = pd.Series(values, index=df.index, dtype=dtype)
    return result


def _columns(scores: Sequence[Score]) -> list[tuple[str, list[Any], str]]:
    return [
        ("", [s.value for s in scores], "Float64"),
        ("_flagged", [s.hallucinated if s.ok else None for s in scores], "boolean"),
        ("_reason", [s.reason or s.error or "" for s in scores], "object"),
        ("_spans", [[span.model_dump(exclude_none=True) for span in s.spans] for s in scores], "object"),
    ]


__all__ = ["COLUMN_SUFFIXES", "score_frame"]
