"""``langfuse[:PROJECT]``: the traces of a Langfuse project, scores back as Langfuse scores.

Reading, through the SDK's REST client (``langfuse.api.LangfuseAPI``, the Fern client of the
public API): ``observations.get_many`` (``GET /api/public/v2/observations``, Langfuse's real-time
read path, cursor-paged, so a large project streams) lists the root observations, one per trace,
with one ``filter`` holding everything pushed down: ``isRootObservation``, ``startTime`` >= since
and < until, ``tag=VALUE`` as the trace's tags, ``KEY=VALUE`` as the root's metadata. Then per
trace: its observations (``traceId=``, paged), and its scores (``GET /api/public/v3/scores``,
``source=API``); each observation's ``sessionId`` (its trace's session) is the record's
``session_id``. langfuse 3+ SDKs removed the trace listing (``trace.list``); server v3+ serves these.

Observations: ``type`` is the kind (GENERATION as LLM; v3+ types CHAIN, RETRIEVER, AGENT, TOOL,
EMBEDDING, ... as they are; a plain SPAN as CHAIN); input/output come back as the raw text that
was logged (JSON text decoded where it is JSON); a retriever's output is LangChain's document list.

Ids: Langfuse v3+ names traces and observations by their OpenTelemetry ids, so the record's
``trace_id`` is the trace id and its ``span_id`` the root observation's, which the Langfuse sink
scores. A score is groundtrace's when it came through the API (``source`` API) carrying the
metadata the sink always writes (label, higher_is_better, unsupported_spans).

Settings: the SDK's variables (``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``,
``LANGFUSE_BASE_URL`` or ``LANGFUSE_HOST``), read as the Langfuse sink reads them; arguments
override them, or pass a ready ``client=``. Keys belong to one project: with ``:PROJECT`` the
source first checks that the keys' project has that name (or id).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.sinks.langfuse import base_url, build_api
from groundtrace.sources import Source, SourceError, SourceFilter
from groundtrace.sources.platforms import retrieved, scored_views, span_kind, unreachable
from groundtrace.sources.spans import SpanView, records_from_traces

ROOT_FIELDS = "core,basic,io,metadata,trace_context"
TRACE_FIELDS = "core,basic,io,metadata"
#: metadata keys the Langfuse sink writes on every score: how a groundtrace score is told apart
SINK_METADATA = frozenset({"label", "higher_is_better", "unsupported_spans"})
_FIX = "check LANGFUSE_BASE_URL/LANGFUSE_HOST (or host=) and the keys LANGFUSE_PUBLIC_KEY/LANGFUSE_SECRET_KEY"


def observation_filter(filters: SourceFilter) -> str:
    """The JSON ``filter`` of the root-observation listing (it replaces every query-parameter filter)."""
    conditions: list[dict[str, Any]] = [{"type": "boolean", "column": "isRootObservation", "operator": "=",
                                         "value": True}]
    if filters.since:
        conditions.append({"type": "datetime", "column": "startTime", "operator": ">=",
                           "value": filters.since.isoformat()})
    if filters.until:
        conditions.append({"type": "datetime", "column": "startTime", "operator": "<",
                           "value": filters.until.isoformat()})
    for key, value in filters.metadata.items():
        if key == "tag":
            conditions.append({"type": "arrayOptions", "column": "tags", "operator": "any of", "value": [str(value)]})
        else:
            conditions.append({"type": "stringObject", "column": "metadata", "key": key, "operator": "=",
                               "value": str(value)})
    return json.dumps(conditions)


def _plain(value: Any) -> Any:
    """A metadata value the SDK stored as JSON text ('"staging"') as the value it stands for."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def observation_view(observation: Any) -> SpanView:
    kind = span_kind(observation.type)
    metadata = {key: _plain(value) for key, value in (observation.metadata or {}).items()}
    if observation.tags:
        metadata["tags"] = list(observation.tags)
    return SpanView(trace_id=observation.trace_id, span_id=observation.id,
                    parent_id=observation.parent_observation_id or None, kind=kind, name=observation.name or "",
                    start_time=observation.start_time, input=observation.input, output=observation.output,
                    documents=retrieved(kind, observation.output), metadata=metadata,
                    session_id=observation.session_id or None)  # the trace's sessionId ("basic" fields)


def is_groundtraces(score: Any) -> bool:
    return str(getattr(score.source, "value", score.source)).upper() == "API" and SINK_METADATA <= set(score.metadata or {})


class LangfuseSource(Source):
    """``timeout_s`` bounds each request of the client built here; ``page_size`` observations per page."""

    name = "langfuse"
    sink = "langfuse"

    def __init__(self, target: str | None = None, *, settings: Any = None, client: Any = None,
                 public_key: str | None = None, secret_key: str | None = None, host: str | None = None,
                 timeout_s: float = 30.0, page_size: int = 100, **options: Any) -> None:
        super().__init__(target, settings=settings, **options)
        try:
            from langfuse.api import LangfuseAPI
        except ImportError as error:
            raise missing_extra("langfuse", "the Langfuse source", error) from None
        ready = client is not None
        if client is None:
            client = build_api(public_key, secret_key, host, timeout_s, "the Langfuse source")
        self.api = client if isinstance(client, LangfuseAPI) else client.api
        wrapper = getattr(self.api, "_client_wrapper", None)  # the SDK keeps its URL there, privately
        self.url = wrapper.get_base_url() if ready and wrapper is not None else base_url(host)
        self.page_size = max(1, min(page_size, 1000))  # the API's maximum page

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        filters = filters or SourceFilter()
        if self.target:
            self._check_project()
        where = observation_filter(filters)

        def traces() -> Iterator[list[SpanView]]:
            roots = self._paged(lambda cursor: self.api.observations.get_many(
                fields=ROOT_FIELDS, filter=where, limit=self.page_size, cursor=cursor))
            for root in roots:
                views = [observation_view(o) for o in self._observations_of(root.trace_id)]
                for view in views:  # the trace's tags come with the root listing only
                    if view.span_id == root.id:
                        view.metadata = observation_view(root).metadata
                scored = [s.name for s in self._scores_of(root.trace_id) if is_groundtraces(s)]
                yield views + scored_views(root.trace_id, root.id, scored, root.start_time)

        yield from records_from_traces(traces(), self.spec, filters, self.stats)

    def _observations_of(self, trace_id: str) -> Iterator[Any]:
        return self._paged(lambda cursor: self.api.observations.get_many(
            trace_id=trace_id, fields=TRACE_FIELDS, limit=self.page_size, cursor=cursor))

    def _scores_of(self, trace_id: str) -> Iterator[Any]:
        return self._paged(lambda cursor: self.api.scores.get_many(
            trace_id=trace_id, source="API", fields="details", limit=100, cursor=cursor))

    def _paged(self, fetch: Callable[[str | None], Any]) -> Iterator[Any]:
        cursor = None
        while True:
            try:
                page = fetch(cursor)
            except Exception as error:
                raise unreachable("Langfuse", self.url, error, _FIX) from error
            yield from page.data
            cursor = page.meta.cursor
            if not cursor or not page.data:
                return

    def _check_project(self) -> None:
        try:
            projects = self.api.projects.get().data
        except Exception as error:
            raise unreachable("Langfuse", self.url, error, _FIX) from error
        if not any(self.target in (project.name, project.id) for project in projects):
            names = ", ".join(repr(p.name) for p in projects) or "none"
            raise SourceError(f"the Langfuse keys at {self.url} belong to project {names}, not {self.target!r}: "
                              "use that project's LANGFUSE_PUBLIC_KEY/LANGFUSE_SECRET_KEY, or langfuse:PROJECT "
                              "with the keys' project")
