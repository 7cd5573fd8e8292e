"""``phoenix:PROJECT``: the requests of a Phoenix project, read through ``arize-phoenix-client``.

What is read, page by page (``page_size`` root spans at a time, newest first as Phoenix lists them):

1. the project's root spans (``parent_id=null``) that started in [since, until): the time window is
   part of the query, so Phoenix only sends what the window holds;
2. the roots whose metadata or tags do not match ``--where`` are counted as filtered out and go
   no further;
3. every span of the remaining traces (``trace_id=...``), mapped to SpanViews by the same
   OpenInference reading as ``otel-json`` (Phoenix keeps the OpenInference attributes, flat, and
   the span kind beside them);
4. the span annotations of those roots: one that groundtrace's Phoenix sink wrote (annotator kind
   CODE, the sink's metadata keys) names a metric already scored: it joins the trace as an
   EVALUATOR view (as the other platforms' scores do), so ``metadata["groundtrace.scored"]`` lists it.

Then each trace goes to :func:`~groundtrace.sources.spans.assemble`. Records carry the trace id and
the root's span id, so the Phoenix sink annotates the same root span.

The phoenix client's ``get_spans`` collects every page before it returns; to stream, the roots are
read with the same ``GET /v1/projects/{project}/spans`` request on the client's own httpx client,
following its cursor.

Settings: the phoenix client's environment (``PHOENIX_COLLECTOR_ENDPOINT``, ``PHOENIX_ENDPOINT``,
``PHOENIX_API_KEY``, ``PHOENIX_CLIENT_HEADERS``), or the options ``base_url``, ``api_key``,
``client`` (a ready ``phoenix.client.Client``), ``timeout_s``, ``page_size``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.sources import Source, SourceError, SourceFilter
from groundtrace.sources.openinference import span_view
from groundtrace.sources.platforms import scored_views, unreachable
from groundtrace.sources.spans import FILTERED, SpanView, as_mapping, group_by_trace, records_from_traces

_START_IT = ("start it (phoenix serve), or point PHOENIX_COLLECTOR_ENDPOINT (or the base_url option) at the "
             "Phoenix your application exports to")
#: metadata keys every annotation of groundtrace's Phoenix sink carries (sinks/phoenix.py)
SINK_METADATA_KEYS = frozenset({"higher_is_better", "unsupported_spans"})


def is_groundtrace_annotation(annotation: Mapping[str, Any]) -> bool:
    """Whether a span annotation is one groundtrace's Phoenix sink wrote (its name is a metric)."""
    metadata = annotation.get("metadata")
    return (annotation.get("annotator_kind") in ("CODE", "LLM") and isinstance(metadata, Mapping)
            and SINK_METADATA_KEYS <= metadata.keys())


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def phoenix_span_view(span: Any) -> SpanView | None:
    """One span of Phoenix's REST API (``context``, ``span_kind``, ``parent_id``, ``start_time``,
    flat ``attributes``) as a SpanView; None without ids (or with ids that are not text)."""
    span = as_mapping(span)
    context = as_mapping(span.get("context"))
    trace_id, span_id = _text_or_none(context.get("trace_id")), _text_or_none(context.get("span_id"))
    if trace_id is None or span_id is None:
        return None
    attributes = dict(as_mapping(span.get("attributes")))
    if span.get("span_kind"):  # Phoenix moves openinference.span.kind out of the attributes
        attributes.setdefault("openinference.span.kind", span["span_kind"])
    start = span.get("start_time")
    try:
        started = datetime.fromisoformat(start.replace("Z", "+00:00")) if isinstance(start, str) else None
    except ValueError:
        started = None
    return span_view(trace_id, span_id, _text_or_none(span.get("parent_id")), _text_or_none(span.get("name")) or "",
                     started, attributes)


class PhoenixSource(Source):
    """``phoenix:PROJECT`` (a project name or id)."""

    name = "phoenix"
    sink = "phoenix"

    def __init__(self, target: str | None = None, *, settings: Any = None, client: Any = None,
                 base_url: str | None = None, api_key: str | None = None, timeout_s: float = 30.0,
                 page_size: int = 100, **options: Any) -> None:
        super().__init__(target, settings=settings, **options)
        if not target:
            raise SourceError("phoenix needs a project: phoenix:PROJECT (the name shown in Phoenix, e.g. phoenix:default)")
        try:
            import httpx
            import phoenix.client  # noqa: F401  (the extra is installed)
        except ImportError as error:
            raise missing_extra("phoenix", "the Phoenix source", error) from None
        self._httpx = httpx
        self._owns_client = client is None  # a client the caller passed stays open for the caller
        if client is None:
            from groundtrace.sinks.phoenix import phoenix_client

            client = phoenix_client(base_url, api_key, timeout_s)
        self.client = client
        self.page_size = max(1, min(int(page_size), 1000))

    @property
    def url(self) -> str:
        return str(getattr(self.client._client, "base_url", "?")).rstrip("/")

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        filters = filters or SourceFilter()
        if filters.limit == 0:
            return
        for roots in self._root_pages(filters):
            wanted = []
            for root in roots:
                if filters.admits_metadata(root.metadata, root.metadata.get("tags")):
                    wanted.append(root)
                else:
                    self.stats.skip(FILTERED)
            if not wanted:
                continue
            scored = self._scored([root.span_id for root in wanted])
            traces = group_by_trace(self._trace_spans([root.trace_id for root in wanted]))
            yield from records_from_traces(
                ([root, *(s for s in traces.get(root.trace_id, ()) if s.span_id != root.span_id),
                  *scored_views(root.trace_id, root.span_id, scored.get(root.span_id, ()), root.start_time)]
                 for root in wanted),
                self.spec, filters, self.stats)
            if filters.limit is not None and self.stats.records >= filters.limit:
                return  # before the next page is asked for

    # ------------------------------------------------------------------------------ requests
    def _root_pages(self, filters: SourceFilter) -> Iterator[list[SpanView]]:
        params: dict[str, Any] = {"parent_id": "null"}
        if filters.since:
            params["start_time"] = filters.since.isoformat()
        if filters.until:
            params["end_time"] = filters.until.isoformat()
        for page in self._pages(params):
            yield [view for view in map(phoenix_span_view, page) if view is not None]

    def _trace_spans(self, trace_ids: Sequence[str]) -> list[SpanView]:
        spans = [span for page in self._pages({"trace_id": list(trace_ids)}) for span in page]
        return [view for view in map(phoenix_span_view, spans) if view is not None]

    def _pages(self, params: Mapping[str, Any]) -> Iterator[list[Mapping[str, Any]]]:
        """The pages of ``GET v1/projects/{project}/spans`` with ``params``, following the cursor."""
        cursor = None
        while True:
            query = {**params, "limit": self.page_size, **({"cursor": cursor} if cursor else {})}
            payload = self._get(f"v1/projects/{self.target}/spans", query)
            yield list(payload.get("data") or [])
            cursor = payload.get("next_cursor")
            if not cursor or not payload.get("data"):
                return

    def _get(self, path: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        httpx = self._httpx
        try:
            response = self.client._client.get(path, params=params, headers={"accept": "application/json"})
            response.raise_for_status()
            return response.json()
        except httpx.HTTPStatusError as error:
            raise SourceError(self._refusal(error.response)) from None
        except httpx.TransportError as error:
            raise unreachable("Phoenix", self.url, error, _START_IT) from None

    def _refusal(self, response: Any) -> str:
        status = response.status_code
        if status == 404:
            return (f"Phoenix at {self.url} has no project '{self.target}': use the project name shown in Phoenix "
                    "(the openinference.project.name your application sets; 'default' when it sets none)")
        if status in (401, 403):
            return f"Phoenix at {self.url} refused the request (HTTP {status}): set PHOENIX_API_KEY to a valid key"
        return f"Phoenix at {self.url} answered HTTP {status} to a span query: {response.text[:300]}"

    def _scored(self, root_span_ids: Sequence[str]) -> dict[str, list[str]]:
        """span id -> names of the groundtrace metrics already annotated on it."""
        httpx = self._httpx
        try:
            annotations = self.client.spans.get_span_annotations(span_ids=list(root_span_ids),
                                                                 project_identifier=self.target)
        except httpx.HTTPStatusError as error:
            raise SourceError(self._refusal(error.response)) from None
        except httpx.TransportError as error:
            raise unreachable("Phoenix", self.url, error, _START_IT) from None
        scored: dict[str, set[str]] = {}
        for annotation in annotations:
            if is_groundtrace_annotation(annotation) and annotation.get("span_id") and annotation.get("name"):
                scored.setdefault(annotation["span_id"], set()).add(annotation["name"])
        return {span_id: sorted(names) for span_id, names in scored.items()}

    def close(self) -> None:
        if self._owns_client:
            self.client._client.close()


__all__ = ["PhoenixSource", "is_groundtrace_annotation", "phoenix_span_view"]
