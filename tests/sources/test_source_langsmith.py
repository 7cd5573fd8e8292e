"""LangSmith source: a real LangChain RAG chain traced by langchain-core's LangChainTracer with the real
SDK into a loopback server that keeps the runs it is sent and answers LangSmith's read endpoints
(``GET /sessions``, ``POST /runs/query`` with cursors, ``GET /feedback``) with them; the LangSmith
sink's feedback goes to the same server and shows up on the next read."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langgraph")

import langsmith  # noqa: E402
from langchain_core.tracers import LangChainTracer  # noqa: E402
from platform_app import QUESTIONS, run_requests  # noqa: E402

from groundtrace.errors import install_hint
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.score import Score  # noqa: E402
from groundtrace.sinks.langsmith import LangSmithSink  # noqa: E402
from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceError, SourceFilter, open_source  # noqa: E402
from groundtrace.sources.langsmith import ROOT_FIELDS, RUN_FIELDS, LangSmithSource  # noqa: E402

API_KEY = "lsv2_pt_test_secret_0123456789abcdef"
PROJECT_ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
TENANT_ID = "a3bb189e-8bf9-4888-9912-ace4e6543002"
PAGE = 2  # runs per /runs/query page: every listing here takes several pages


class FakeLangSmith:
    """What a LangSmith deployment does with the requests used here, kept in memory. The filter
    language is not interpreted: ``filters`` maps each filter string a test expects to the
    predicate it means, and any other string is refused with 400, as a bad filter would be."""

    def __init__(self) -> None:
        self.runs: dict[str, dict] = {}
        self.feedback: list[dict] = []
        self.filters: dict[str, object] = {}

    def respond(self, request):
        if request.path == "/info":
            return 200, {"version": "0.12.40", "instance_flags": {}}
        if request.path == "/sessions":
            if request.query["name"] != ["rag-app"]:
                return 200, []
            return 200, [{"id": PROJECT_ID, "name": "rag-app", "tenant_id": TENANT_ID,
                          "reference_dataset_id": None, "start_time": "2026-01-01T00:00:00Z"}]
        if (request.method, request.path) == ("POST", "/runs"):
            self.runs[request.json["id"]] = request.json
            return 200, {}
        if request.method == "PATCH" and request.path.startswith("/runs/"):
            self.runs[request.path.rsplit("/", 1)[1]].update(request.json)
            return 200, {}
        if request.path == "/runs/query":
            return self.query(request.json)
        if (request.method, request.path) == ("POST", "/feedback"):
            self.feedback.append(request.json)
            return 200, {"id": request.json["id"]}
        if (request.method, request.path) == ("GET", "/feedback"):
            found = [f for f in self.feedback if f["run_id"] in request.query["run"]
                     and f["feedback_source"]["type"] in request.query["source"]]
            return 200, found
        return 404, {"detail": "Not Found"}

    def query(self, body: dict):
        if body.get("filter") is not None and body["filter"] not in self.filters:
            return 400, {"detail": f"unexpected filter {body['filter']}"}
        runs = sorted(self.runs.values(), key=lambda r: r["start_time"])
        matching = [
            r for r in runs
            if body["session"] == [PROJECT_ID]
            and (not body.get("is_root") or r.get("parent_run_id") is None)
            and body.get("trace") in (None, r["trace_id"])
            and (body.get("start_time") is None or r["start_time"] >= body["start_time"])
            and (body.get("filter") is None or self.filters[body["filter"]](r))
        ]
        start = int(body.get("cursor") or 0)
        page = [self.stored(r, body["select"]) for r in matching[start:start + PAGE]]
        more = start + PAGE < len(matching)
        return 200, {"runs": page, "cursors": {"next": str(start + PAGE) if more else None}}

    def stored(self, run: dict, select: list[str]) -> dict:
        """A run as the server returns it: the selected fields, with what the server adds."""
        stats = {f["key"]: {"n": 1, "avg": f.get("score")} for f in self.feedback if f["run_id"] == run["id"]}
        full = {**run, "session_id": PROJECT_ID, "status": "success", "feedback_stats": stats or None}
        return {field: full.get(field) for field in select}


@pytest.fixture
def langsmith_app(loopback):
    """The fake deployment with three RAG requests, a chain without retrieval and a bare retrieval,
    traced by the real tracer; and what the app used for each RAG request."""
    fake = FakeLangSmith()
    server = loopback(fake.respond)
    client = langsmith.Client(api_url=server.url, api_key=API_KEY, auto_batch_tracing=False)
    tracer = LangChainTracer(project_name="rag-app", client=client)
    threads = {0: {"thread_id": "thread-1"}, 1: {"conversation_id": 7}}  # LangSmith's thread keys
    used = run_requests([tracer], lambda i: {"env": "prod" if i == 1 else "staging", **threads.get(i, {})})
    tracer.wait_for_futures()
    roots = [r for r in sorted(fake.runs.values(), key=lambda r: r["start_time"]) if r.get("parent_run_id") is None]
    assert len(roots) == 5 and all(r.get("end_time") for r in fake.runs.values())
    server.requests.clear()  # what follows is the source's
    return {"fake": fake, "server": server, "used": used, "roots": roots}


def source_for(app, target: str = "rag-app") -> LangSmithSource:
    return open_source(f"langsmith:{target}", api_url=app["server"].url, api_key=API_KEY)


def queries(app) -> list[dict]:
    return [r.json for r in app["server"].requests if r.path == "/runs/query"]


def test_the_source_reconstructs_what_the_app_used(langsmith_app) -> None:
    source = source_for(langsmith_app)
    records = list(source.records())

    assert [(r.question, r.contexts, r.answer) for r in records] == langsmith_app["used"]
    roots = langsmith_app["roots"]
    for record, root in zip(records, roots, strict=False):  # the RAG roots come first
        assert record.id == record.run_id == root["id"]
        assert record.trace_links == {"langsmith_project": "rag-app"}
        assert record.trace_id is None and record.span_id is None  # LangSmith's ids are not OpenTelemetry's
        assert record.metadata[SOURCE_KEY] == "langsmith:rag-app" and record.metadata["env"] in ("staging", "prod")
        assert SCORED_KEY not in record.metadata
    assert [r.session_id for r in records] == ["thread-1", "7", None]
    assert source.stats.as_dict() == {"traces": 5, "records": 3, "skipped": {"no retrieval": 1, "no answer": 1}}

    # the exact requests the SDK sent: the project lookup, the roots page by page, then each trace
    (lookup,) = [r for r in langsmith_app["server"].requests if r.path == "/sessions"]
    assert lookup.query == {"name": ["rag-app"], "limit": ["1"], "include_stats": ["False"]}
    assert lookup.headers["x-api-key"] == API_KEY
    sent = queries(langsmith_app)
    root_query = {"session": [PROJECT_ID], "is_root": True, "select": ROOT_FIELDS}
    assert [q for q in sent if q.get("is_root")] == [root_query, {**root_query, "cursor": "2"},
                                                     {**root_query, "cursor": "4"}]
    trace_queries = [q for q in sent if "trace" in q]
    assert [q["trace"] for q in trace_queries if "cursor" not in q] == [r["id"] for r in roots]
    assert all(q["session"] == [PROJECT_ID] and q["select"] == RUN_FIELDS for q in trace_queries)
    assert len(sent) == 3 + len(trace_queries)
    assert "/feedback" not in langsmith_app["server"].paths()  # no trace had feedback: nothing asked


def test_since_until_limit_and_metadata_are_honoured(langsmith_app) -> None:
    fake, roots = langsmith_app["fake"], langsmith_app["roots"]
    since = datetime.fromisoformat(roots[1]["start_time"])
    until = datetime.fromisoformat(roots[2]["start_time"])
    window = f'lt(start_time, "{until.isoformat()}")'
    fake.filters[window] = lambda run: run["start_time"] < until.isoformat()
    source = source_for(langsmith_app)
    records = list(source.records(SourceFilter(since=since, until=until)))
    assert [r.question for r in records] == [QUESTIONS[1]]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}
    assert queries(langsmith_app)[0] == {"session": [PROJECT_ID], "is_root": True, "start_time": since.isoformat(),
                                         "filter": window, "select": ROOT_FIELDS}

    langsmith_app["server"].requests.clear()
    prod = 'and(eq(metadata_key, "env"), eq(metadata_value, "prod"))'
    fake.filters[prod] = lambda run: run["extra"]["metadata"].get("env") == "prod"
    source = source_for(langsmith_app)
    records = list(source.records(SourceFilter(metadata={"env": "prod"})))
    assert [r.question for r in records] == [QUESTIONS[1]]
    assert queries(langsmith_app)[0]["filter"] == prod
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}

    both = f'and({window}, has(tags, "nightly"))'
    fake.filters[both] = lambda run: "nightly" in (run.get("tags") or [])
    assert list(source_for(langsmith_app).records(SourceFilter(until=until, metadata={"tag": "nightly"}))) == []

    langsmith_app["server"].requests.clear()
    source = source_for(langsmith_app)
    records = list(source.records(SourceFilter(limit=1)))
    assert [r.question for r in records] == [QUESTIONS[0]]
    # streaming: one page of roots and one trace read (its runs page by page), not the whole project
    assert {q.get("trace") for q in queries(langsmith_app)} == {None, roots[0]["id"]}
    assert sum("trace" not in q for q in queries(langsmith_app)) == 1


def test_feedback_from_the_sink_lands_on_the_root_run_and_marks_it_scored(langsmith_app) -> None:
    (record,) = source_for(langsmith_app).records(SourceFilter(limit=1))
    # the record names its project: the sink's own (and LANGSMITH_PROJECT, which the SDK caches) is not asked
    sink = LangSmithSink(api_url=langsmith_app["server"].url, api_key=API_KEY, project_name="not-this-one")
    sink.emit(record, [Score(metric="grounding", value=0.9, higher_is_better=True, hallucinated=False,
                             threshold=0.5, reason="supported", record_id=record.id)])
    sent = dict(*langsmith_app["fake"].feedback)
    for generated in ("id", "created_at", "modified_at"):
        assert sent.pop(generated)
    root_id = langsmith_app["roots"][0]["id"]
    assert sent == {
        "run_id": root_id, "trace_id": root_id, "session_id": PROJECT_ID, "key": "grounding", "score": 1.0,
        "value": "grounded", "comment": "grounded: grounding 0.90 (threshold 0.50; higher is better)\nsupported",
        "feedback_source": {"type": "model", "metadata": {"name": "groundtrace"}},
        "extra": {"value": 0.9, "higher_is_better": True, "hallucinated": False, "threshold": 0.5, "unsupported_spans": [],
                  "record_id": root_id, "session_id": "thread-1"},  # the run's thread, read back
        "extend_trace_retention": True,
    }
    # a person's feedback and another model's on the same run are not groundtrace's
    langsmith_app["fake"].feedback += [
        {**langsmith_app["fake"].feedback[0], "key": "thumbs", "feedback_source": {"type": "api", "metadata": {}}},
        {**langsmith_app["fake"].feedback[0], "key": "helpfulness", "feedback_source": {"type": "model", "metadata": {"name": "other-evaluator"}}},
    ]

    langsmith_app["server"].requests.clear()
    records = list(source_for(langsmith_app).records())
    assert records[0].metadata[SCORED_KEY] == ["grounding"]
    assert all(SCORED_KEY not in r.metadata for r in records[1:])
    (asked,) = [r for r in langsmith_app["server"].requests if r.path == "/feedback"]
    assert asked.query == {"run": [root_id], "limit": ["100"], "source": ["model"], "offset": ["0"]}


def test_an_unknown_project_says_so(langsmith_app) -> None:
    with pytest.raises(SourceError, match=r"has no project 'nope': check the name"):
        list(source_for(langsmith_app, "nope").records())


def test_a_down_server_names_the_url_and_what_to_do(refused_url) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=rf"LangSmith at {refused_url} could not be read \(LangSmithConnectionError.*"
                                          "check LANGSMITH_ENDPOINT") as caught:
        list(LangSmithSource("rag-app", api_url=refused_url, api_key=API_KEY).records())
    assert API_KEY[5:-2] not in str(caught.value)
    assert time.monotonic() - started < 5


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langsmith", None)
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("langsmith"))):
        LangSmithSource("rag-app")


def test_no_window_means_no_filter_and_a_future_window_reads_nothing(langsmith_app) -> None:
    later = datetime.now(timezone.utc) + timedelta(days=1)
    source = source_for(langsmith_app)
    assert list(source.records(SourceFilter(since=later))) == []
    assert source.stats.as_dict() == {"traces": 0, "records": 0, "skipped": {}}
