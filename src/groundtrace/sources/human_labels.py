"""The labels people put on the requests a source read, read back from the platform as written.

What counts as a human label, per platform (machine verdicts, groundtrace's own included, are left out):

- LangSmith: feedback on the record's root run (``GET /feedback?run=...``) whose source type is not
  ``model`` (an evaluator) or ``auto_eval`` (an online evaluator): ``api`` (the SDK's create_feedback, an
  app's thumbs) and ``app`` (the LangSmith UI, annotation queues). The value: ``score``, and ``value`` as
  the category.
- Langfuse: scores of the record's trace with source ``ANNOTATION`` (the Langfuse UI, annotation queues;
  ``GET /api/public/v3/scores?traceId=...&source=ANNOTATION``): NUMERIC and BOOLEAN values as the
  number, CATEGORICAL ones as the category.
- Phoenix: span annotations of the record's root span whose ``annotator_kind`` is ``HUMAN``
  (``GET /v1/projects/{project}/span_annotations``): ``result.score`` and ``result.label``.
- MLflow: feedback assessments of the record's trace whose source type is ``HUMAN`` and that no later
  assessment overrode (``valid``): the value as it was logged (a boolean, a number or text).

A record with several labels of one name (two reviewers, a changed mind) counts the last one written.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from groundtrace.record import Record
from groundtrace.sources import Source, SourceError
from groundtrace.sources.platforms import unreachable

#: LangSmith feedback source types that are machines, not people
MACHINE_FEEDBACK = frozenset({"model", "auto_eval"})
_CHUNK = 50  # root run ids per LangSmith feedback request (they go in the query string)


@dataclass(frozen=True)
class HumanLabel:
    """One label a person put on one record: a number or boolean (``score``) and/or a category."""

    record_id: str
    name: str
    score: float | bool | None = None
    category: str | None = None
    at: datetime | None = None  # when it was last written: the last of a name counts


def read_human_labels(source: Source, records: Sequence[Record]) -> list[HumanLabel]:
    """Every human label, of every name, that ``source``'s platform keeps on ``records`` (read by it)."""
    reader = _READERS.get(source.name)
    if reader is None:
        raise SourceError(f"{source.spec} keeps no human labels: label its records with `groundtrace review` "
                          f"and pass --labels FILE (platforms with labels: {', '.join(sorted(_READERS))})")
    return list(reader(source, records)) if records else []


def latest(labels: Sequence[HumanLabel], name: str) -> dict[str, HumanLabel]:
    """Record id -> its last label named ``name``."""
    chosen: dict[str, HumanLabel] = {}
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    for label in labels:
        if label.name != name:
            continue
        kept = chosen.get(label.record_id)
        if kept is None or (label.at or oldest) >= (kept.at or oldest):
            chosen[label.record_id] = label
    return chosen


def names_on(labels: Sequence[HumanLabel]) -> Counter[str]:
    """How many records carry each label name (what to say when the name asked for is not there)."""
    return Counter(name for name, _ in {(label.name, label.record_id) for label in labels})


# ---------------------------------------------------------------------------------- the platforms
def _langsmith(source: Any, records: Sequence[Record]) -> Iterator[HumanLabel]:
    ids = [str(r.run_id or r.id) for r in records]
    for start in range(0, len(ids), _CHUNK):
        try:
            feedback = list(source.client.list_feedback(run_ids=ids[start:start + _CHUNK]))
        except Exception as error:
            raise unreachable("LangSmith", source.client.api_url, error, "check LANGSMITH_ENDPOINT and "
                              "LANGSMITH_API_KEY") from error
        for item in feedback:
            kind = str(getattr(item.feedback_source, "type", "") or "")
            if kind in MACHINE_FEEDBACK or item.run_id is None:
                continue
            score, value = item.score, item.value
            if score is None and isinstance(value, (bool, int, float)):
                score, value = value, None
            yield HumanLabel(str(item.run_id), item.key, score, _category(value),
                             _utc(item.modified_at or item.created_at))


def _langfuse(source: Any, records: Sequence[Record]) -> Iterator[HumanLabel]:
    for record in records:
        trace_id = record.trace_id or record.id
        scores = source._paged(lambda cursor, trace_id=trace_id: source.api.scores.get_many(
            trace_id=trace_id, source="ANNOTATION", limit=100, cursor=cursor))
        for score in scores:
            if str(getattr(score.source, "value", score.source)).upper() != "ANNOTATION":
                continue
            kind = str(getattr(score, "data_type", "") or "").upper()
            number = score.value if kind in ("NUMERIC", "BOOLEAN") else None
            yield HumanLabel(str(record.id), score.name, number, None if number is not None else _category(score.value),
                             _utc(score.updated_at or score.timestamp))


def _phoenix(source: Any, records: Sequence[Record]) -> Iterator[HumanLabel]:
    by_span = {str(r.span_id): str(r.id) for r in records if r.span_id}
    httpx = source._httpx
    try:
        annotations = source.client.spans.get_span_annotations(span_ids=list(by_span), project_identifier=source.target)
    except httpx.HTTPStatusError as error:
        raise SourceError(source._refusal(error.response)) from None
    except httpx.TransportError as error:
        raise unreachable("Phoenix", source.url, error, "start it (phoenix serve) or point PHOENIX_COLLECTOR_ENDPOINT "
                          "at it") from None
    # Phoenix lists the newest first and keeps whole seconds: read oldest first, so that of two labels
    # written within one second the later counts
    for annotation in reversed(annotations):
        if annotation.get("annotator_kind") != "HUMAN" or annotation.get("span_id") not in by_span:
            continue
        result = annotation.get("result") or {}
        yield HumanLabel(by_span[annotation["span_id"]], str(annotation.get("name")), result.get("score"),
                         _category(result.get("label")), _when(annotation.get("updated_at") or annotation.get("created_at")))


def _mlflow(source: Any, records: Sequence[Record]) -> Iterator[HumanLabel]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=source.tracking_uri)
    for record in records:
        trace_id = str(record.trace_links.get("mlflow") or record.id)
        try:
            trace = client.get_trace(trace_id)
        except Exception as error:
            raise unreachable("MLflow", client.tracking_uri, error, f"check the tracking server (trace {trace_id})") from error
        for assessment in trace.info.assessments or []:
            feedback = getattr(assessment, "feedback", None)
            source_type = getattr(assessment.source, "source_type", None)
            if feedback is None or source_type != "HUMAN" or assessment.valid is False or feedback.error is not None:
                continue
            value = feedback.value
            number = value if isinstance(value, (bool, int, float)) else None
            at = assessment.last_update_time_ms or assessment.create_time_ms
            yield HumanLabel(str(record.id), assessment.name, number, None if number is not None else _category(value),
                             datetime.fromtimestamp(at / 1000, tz=timezone.utc) if at else None)


_READERS: dict[str, Callable[[Any, Sequence[Record]], Iterator[HumanLabel]]] = {
    "langsmith": _langsmith, "langfuse": _langfuse, "phoenix": _phoenix, "mlflow": _mlflow}


def _category(value: Any) -> str | None:
    """A label's non-numeric value as text (a dict or list as its JSON, so an error can show it)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return _utc(value)
    try:
        return _utc(datetime.fromisoformat(str(value).replace("Z", "+00:00"))) if value else None
    except ValueError:
        return None


__all__ = ["MACHINE_FEEDBACK", "HumanLabel", "latest", "names_on", "read_human_labels"]
