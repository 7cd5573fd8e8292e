"""``mlflow:EXPERIMENT_ID_OR_NAME``: the traces of one MLflow experiment, scores back as assessments.

Reading: ``MlflowClient.search_traces`` on the experiment, one page (``page_size`` traces, spans
included) at a time, oldest first, so a large experiment streams. ``--since``/``--until`` go into
the filter string as ``timestamp_ms`` bounds; ``--where KEY=VALUE`` as ``tags.KEY = 'VALUE'``
(MLflow's searchable trace tags, set with ``mlflow.update_current_trace(tags=...)``), or as
``metadata.KEY`` with ``match="metadata"``: MLflow's filter has no OR, so one of the two is chosen.

Spans: ``span_type`` (CHAIN, RETRIEVER, CHAT_MODEL, LLM, RERANKER, ...) is the kind; ``inputs`` and
``outputs`` are the values LangChain autologging (or ``@mlflow.trace``) recorded; a retriever's
outputs are its documents (``page_content``, ``id``, ``metadata``).

Ids: the record's ``id`` and ``trace_links['mlflow']`` are the MLflow trace id (``tr-...``, what
the MLflow sink writes feedback to); ``trace_id``/``span_id`` are the OpenTelemetry ids MLflow keeps
under it. Assessments whose source is groundtrace's (CODE / groundtrace, as the sink writes them)
name the metrics already scored.

Where: the tracking URI given as ``tracking_uri=``, else MLflow's own (``MLFLOW_TRACKING_URI``,
``mlflow.set_tracking_uri``). MLflow's HTTP client retries an unreachable server by its own
settings (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, ``MLFLOW_HTTP_REQUEST_TIMEOUT``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.sinks.mlflow import LINK, written_by_groundtrace
from groundtrace.sources import Source, SourceError, SourceFilter
from groundtrace.sources.platforms import metadata_session, retrieved, scored_views, span_kind, unreachable
from groundtrace.sources.spans import SpanView, decode, records_from_traces

# MLflow's own bookkeeping in trace metadata and tags; the rest is the application's
_OWN_PREFIX = "mlflow."
SESSION_KEY = "mlflow.trace.session"
_KEPT_OWN = ("mlflow.trace.user", SESSION_KEY)


def _quoted(value: str) -> str:
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise SourceError(f"an MLflow filter value cannot hold both kinds of quote: {value!r}")


def filter_string(filters: SourceFilter, match: str = "tags") -> str | None:
    """The MLflow search filter for a time window and KEY=VALUE pairs (AND-ed, as MLflow only ANDs)."""
    clauses = []
    if filters.since:
        clauses.append(f"timestamp_ms >= {int(filters.since.timestamp() * 1000)}")
    if filters.until:
        clauses.append(f"timestamp_ms < {int(filters.until.timestamp() * 1000)}")
    for key, value in filters.metadata.items():
        clauses.append(f"{match}.`{key}` = {_quoted(str(value))}")
    return " AND ".join(clauses) or None


def _user_entries(values: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (values or {}).items() if not k.startswith(_OWN_PREFIX) or k in _KEPT_OWN}


def _otel_trace_id(span: Any) -> str | None:
    raw = span.to_dict().get("trace_id")  # base64 of the 16 id bytes (MLflow's span JSON)
    try:
        return base64.b64decode(raw).hex() if raw else None
    except (ValueError, TypeError):
        return None


def trace_views(trace: Any, match: str = "tags") -> tuple[list[SpanView], str | None]:
    """An MLflow Trace as SpanViews (its groundtrace assessments as EVALUATOR views), and the
    OpenTelemetry trace id MLflow keeps for it."""
    info = trace.info
    spans = list(trace.data.spans)
    views = []
    for span in spans:
        kind = span_kind(span.span_type)
        start = datetime.fromtimestamp(span.start_time_ns / 1e9, tz=timezone.utc) if span.start_time_ns else None
        outputs = span.outputs
        views.append(SpanView(trace_id=info.trace_id, span_id=span.span_id, parent_id=span.parent_id, kind=kind,
                              name=span.name, start_time=start, input=span.inputs, output=outputs,
                              documents=retrieved(kind, outputs)))
    root = next((v for v in views if v.parent_id is None), None)
    if root is not None:
        # the field a --where was pushed to wins, so what MLflow matched is what we compare
        tags, metadata = _user_entries(info.tags), _user_entries(info.trace_metadata)
        span_metadata = decode(next(s for s in spans if s.span_id == root.span_id).get_attribute("metadata"))
        root.metadata = {**(span_metadata if isinstance(span_metadata, dict) else {}),
                         **(tags if match == "metadata" else metadata), **(metadata if match == "metadata" else tags)}
        # MLflow files a trace under a session by mlflow.trace.session (metadata; tags before MLflow 3);
        # else the session the request's own metadata names
        session = metadata.get(SESSION_KEY) or tags.get(SESSION_KEY)
        root.session_id = str(session) if session else metadata_session(root.metadata)
    scored = [a.name for a in info.assessments or []
              if written_by_groundtrace(a.source)]
    views += scored_views(info.trace_id, root.span_id if root else None, scored)
    otel_id = _otel_trace_id(spans[0]) if spans else None
    return views, otel_id


class MLflowSource(Source):
    """``tracking_uri``: where MLflow is (default: MLflow's own setting); ``page_size``: traces per
    search request; ``match``: which MLflow field a --where KEY=VALUE names, ``tags`` or ``metadata``."""

    name = "mlflow"
    sink = "mlflow"

    def __init__(self, target: str | None = None, *, settings: Any = None, tracking_uri: str | None = None,
                 page_size: int = 100, match: str = "tags", **options: Any) -> None:
        super().__init__(target, settings=settings, **options)
        if match not in ("tags", "metadata"):
            raise ValueError(f"match must be 'tags' or 'metadata', got {match!r}")
        self.tracking_uri, self.page_size, self.match = tracking_uri, max(1, page_size), match

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        filters = filters or SourceFilter()
        if not self.target:
            raise SourceError("mlflow needs an experiment: mlflow:EXPERIMENT_ID or mlflow:EXPERIMENT_NAME")
        try:
            from mlflow import MlflowClient
        except ImportError as error:
            raise missing_extra("mlflow", "the MLflow source", error) from None
        client = MlflowClient(tracking_uri=self.tracking_uri)
        experiment_id = self._experiment_id(client)
        otel_ids: dict[str, str | None] = {}

        def ids(spans: Sequence[SpanView]) -> dict[str, Any]:
            mlflow_id = spans[0].trace_id
            return {"id": mlflow_id, "trace_id": otel_ids.get(mlflow_id), "trace_links": {LINK: mlflow_id}}

        def traces() -> Iterator[list[SpanView]]:
            for trace in self._pages(client, experiment_id, filter_string(filters, self.match)):
                views, otel_ids[trace.info.trace_id] = trace_views(trace, self.match)
                yield views

        yield from records_from_traces(traces(), self.spec, filters, self.stats, ids=ids)

    def _pages(self, client: Any, experiment_id: str, where: str | None) -> Iterator[Any]:
        token = None
        while True:
            try:
                page = client.search_traces(locations=[experiment_id], filter_string=where, max_results=self.page_size,
                                            order_by=["timestamp_ms ASC"], page_token=token)
            except Exception as error:
                raise unreachable("MLflow", client.tracking_uri, error, "check the tracking server and the filter "
                                  f"({where or 'none'})") from error
            yield from page
            token = page.token
            if not token:
                return

    def _experiment_id(self, client: Any) -> str:
        target = str(self.target)
        try:
            experiment = client.get_experiment_by_name(target)
            if experiment is None and target.isdigit():
                from mlflow.exceptions import MlflowException

                try:
                    experiment = client.get_experiment(target)
                except MlflowException as error:
                    if error.error_code != "RESOURCE_DOES_NOT_EXIST":
                        raise
        except SourceError:
            raise
        except Exception as error:
            raise unreachable("MLflow", client.tracking_uri, error, "start the tracking server, or point "
                              "MLFLOW_TRACKING_URI (or tracking_uri=) at the store the application traces to") from error
        if experiment is None:
            raise SourceError(f"MLflow at {client.tracking_uri} has no experiment named or numbered {target!r}: "
                              "check the name (mlflow experiments search) and the tracking URI")
        return experiment.experiment_id
