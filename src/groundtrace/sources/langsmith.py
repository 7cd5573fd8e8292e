"""``langsmith:PROJECT``: the traces of one LangSmith project, scores back as feedback.

Reading: ``Client.list_runs(project_id=..., is_root=True, start_time=since, filter=...)`` lists the
root runs (``POST /runs/query``, cursor-paged by the SDK, so a large project streams); then one
``list_runs(trace_id=...)`` per root reads that trace's runs. ``--until`` and ``--where`` go into
LangSmith's filter language: ``lt(start_time, "...")``; ``KEY=VALUE`` as
``and(eq(metadata_key, "KEY"), eq(metadata_value, "VALUE"))`` (the run's metadata, e.g. a LangChain
call's ``config={"metadata": ...}``), ``tag=VALUE`` as ``has(tags, "VALUE")``.

Runs: ``run_type`` (chain, retriever, llm, prompt, parser, tool, embedding) is the kind; inputs
and outputs are the dicts LangChain's tracer logged (``{"input": ...}``, ``{"output": ...}``, a
retriever's ``{"documents": [{"page_content": ...}]}``).

Ids: the record's ``id`` and ``run_id`` are the root run's id (the LangSmith sink puts feedback on
it); ``trace_links['langsmith_project']`` names the project, so the feedback carries its id.
Feedback already on the root: ``feedback_stats`` says whether there is any; only then are the
root's feedback read (``GET /feedback``) and the keys whose source is groundtrace's (model
feedback named 'groundtrace', as the sink writes it) listed as scored.

Settings: the SDK's (``LANGSMITH_ENDPOINT``, ``LANGSMITH_API_KEY``); ``api_url=``/``api_key=``
override them, or pass a ready ``client=``. The project: the target, else the SDK's
``LANGSMITH_PROJECT``. ``list_runs`` is deprecated in langsmith 0.15 in favour of
``client.runs.query`` (LangSmith servers 0.16+), and is to stay until 2027-01-31.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.sinks.langsmith import PROJECT_LINK, build_client
from groundtrace.sources import Source, SourceError, SourceFilter
from groundtrace.sources.platforms import metadata_session, retrieved, scored_views, span_kind, unreachable
from groundtrace.sources.spans import SpanView, as_mapping, records_from_traces

SOURCE_NAME = "groundtrace"  # the sink's source_info name
ROOT_FIELDS = ["id", "name", "run_type", "start_time", "inputs", "outputs", "extra", "tags", "trace_id",
               "parent_run_id", "dotted_order", "feedback_stats"]
RUN_FIELDS = [f for f in ROOT_FIELDS if f != "feedback_stats"]
_FIX = "check LANGSMITH_ENDPOINT (or api_url=) and LANGSMITH_API_KEY (or api_key=)"


def run_filter(filters: SourceFilter) -> str | None:
    """LangSmith's filter for what ``start_time=`` cannot say: the end of the window and KEY=VALUE."""
    clauses = []
    if filters.until:
        clauses.append(f"lt(start_time, {json.dumps(filters.until.isoformat())})")
    for key, value in filters.metadata.items():
        if key == "tag":
            clauses.append(f"has(tags, {json.dumps(str(value))})")
        else:
            clauses.append(f"and(eq(metadata_key, {json.dumps(key)}), eq(metadata_value, {json.dumps(str(value))}))")
    if len(clauses) > 1:
        return f"and({', '.join(clauses)})"
    return clauses[0] if clauses else None


def run_view(run: Any) -> SpanView:
    kind = span_kind(run.run_type)
    metadata = dict(as_mapping(as_mapping(run.extra).get("metadata")))
    if run.tags:
        metadata["tags"] = list(run.tags)
    return SpanView(trace_id=str(run.trace_id), span_id=str(run.id),
                    parent_id=str(run.parent_run_id) if run.parent_run_id else None, kind=kind, name=run.name,
                    start_time=run.start_time, input=run.inputs, output=run.outputs,
                    documents=retrieved(kind, run.outputs), metadata=metadata,
                    session_id=metadata_session(metadata))  # the thread LangSmith files the run under


class LangSmithSource(Source):
    """``timeout_s`` bounds each request of the client built here."""

    name = "langsmith"
    sink = "langsmith"

    def __init__(self, target: str | None = None, *, settings: Any = None, client: Any = None,
                 api_url: str | None = None, api_key: str | None = None, timeout_s: float = 30.0,
                 **options: Any) -> None:
        super().__init__(target, settings=settings, **options)
        try:
            from langsmith import utils as ls_utils
        except ImportError as error:
            raise missing_extra("langsmith", "the LangSmith source", error) from None
        self._utils = ls_utils
        self.client = client if client is not None else build_client(api_url, api_key, timeout_s)
        self.project = target or ls_utils.get_tracer_project()

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        filters = filters or SourceFilter()
        project_id = self._project_id()

        def traces() -> Iterator[list[SpanView]]:
            roots = self._runs(project_id=project_id, is_root=True, start_time=filters.since,
                               filter=run_filter(filters), select=ROOT_FIELDS)
            for root in roots:
                views = [run_view(run) for run in self._runs(project_id=project_id, trace_id=root.trace_id,
                                                             select=RUN_FIELDS)]
                views += scored_views(str(root.trace_id), str(root.id), self._scored(root), root.start_time)
                yield views

        def ids(spans: Sequence[SpanView]) -> dict[str, Any]:
            root_id = spans[0].trace_id  # LangSmith's trace id is its root run's id
            return {"id": root_id, "run_id": root_id, "trace_id": None, "span_id": None,
                    "trace_links": {PROJECT_LINK: self.project}}

        yield from records_from_traces(traces(), self.spec, filters, self.stats, ids=ids)

    def _project_id(self) -> str:
        try:
            return str(self.client.read_project(project_name=self.project).id)
        except self._utils.LangSmithNotFoundError:
            raise SourceError(f"LangSmith at {self.client.api_url} has no project {self.project!r}: check the name "
                              "(langsmith:PROJECT or LANGSMITH_PROJECT)") from None
        except Exception as error:
            raise unreachable("LangSmith", self.client.api_url, error, _FIX) from error

    def _runs(self, **query: Any) -> Iterator[Any]:
        runs = iter(self.client.list_runs(**{k: v for k, v in query.items() if v is not None}))
        while True:  # each next() may fetch a page: its errors say where
            try:
                run = next(runs)
            except StopIteration:
                return
            except Exception as error:
                raise unreachable("LangSmith", self.client.api_url, error, _FIX) from error
            yield run

    def _scored(self, root: Any) -> list[str]:
        """Metrics groundtrace already put on the root run (read only when it has feedback)."""
        if not root.feedback_stats:
            return []
        try:
            feedback = list(self.client.list_feedback(run_ids=[root.id], feedback_source_type=["model"]))
        except Exception as error:
            raise unreachable("LangSmith", self.client.api_url, error, _FIX) from error
        return [f.key for f in feedback
                if f.feedback_source is not None and (f.feedback_source.metadata or {}).get("name") == SOURCE_NAME]
