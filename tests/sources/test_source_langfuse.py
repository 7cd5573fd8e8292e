"""Langfuse source: a real LangChain RAG chain traced by Langfuse's own LangChain CallbackHandler, which
exports OTLP to a loopback server standing in for Langfuse. The server turns the spans into
observations as Langfuse's OpenTelemetry ingestion does (``langfuse.observation.*`` attributes) and
answers the public read API the SDK's REST client calls (``/api/public/projects``,
``/api/public/v2/observations`` with its JSON filter and cursors, ``/api/public/v3/scores``); the
Langfuse sink's scores go to the same server and show up on the next read."""

from __future__ import annotations

import re
import gzip
import json
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langfuse")
pytest.importorskip("langgraph")
pytest.importorskip("opentelemetry.proto")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from platform_app import QUESTIONS, run_requests  # noqa: E402

from groundtrace.errors import install_hint
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.score import Score  # noqa: E402
from groundtrace.sinks.langfuse import LangfuseSink  # noqa: E402
from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceError, SourceFilter, open_source  # noqa: E402
from groundtrace.sources.langfuse import ROOT_FIELDS, TRACE_FIELDS, LangfuseSource  # noqa: E402
from tests.loopback import LoopbackServer  # noqa: E402

PUBLIC, SECRET = "pk-lf-source-test", "sk-lf-source-test-secret-0123456789"
PROJECT = {"id": "cm-proj-1", "name": "rag-app", "organization": {"id": "cm-org-1", "name": "acme"}, "metadata": {}}
FIELD_GROUPS = {
    "core": ["id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"],
    "basic": ["name", "level", "statusMessage", "version", "environment", "bookmarked", "public", "userId",
              "sessionId", "isRootObservation"],
    "io": ["input", "output"],
    "metadata": ["metadata"],
    "trace_context": ["tags", "release", "traceName"],
}


def _iso(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / 1e9, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _parsed(text):
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return text


class FakeLangfuse:
    """Langfuse's ingestion and read API for what these tests use, in memory."""

    def __init__(self) -> None:
        self.observations: list[dict] = []
        self.scores: list[dict] = []

    def respond(self, request):
        if request.path == "/api/public/otel/v1/traces":
            body = gzip.decompress(request.body) if request.headers.get("content-encoding") == "gzip" else request.body
            self.ingest(ExportTraceServiceRequest.FromString(body))
            return 200, {}
        if request.path == "/api/public/projects":
            return 200, {"data": [PROJECT]}
        if request.path == "/api/public/v2/observations":
            return self.list_observations(request.query)
        if (request.method, request.path) == ("POST", "/api/public/scores"):
            now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
            for sent in request.json:
                self.scores.append({**sent, "projectId": PROJECT["id"], "source": "API", "createdAt": now,
                                    "updatedAt": now, "environment": sent.get("environment", "default")})
            return 202, {"message": "Accepted"}
        if request.path == "/api/public/v3/scores":
            return self.list_scores(request.query)
        return 404, {"message": "Not Found"}

    def ingest(self, export) -> None:
        """OTLP spans as observations: what Langfuse's OpenTelemetry ingestion keeps of them."""
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    prefix = "langfuse.observation.metadata."
                    self.observations.append({
                        "id": span.span_id.hex(), "traceId": span.trace_id.hex(),
                        "parentObservationId": span.parent_span_id.hex() or None,
                        "startTime": _iso(span.start_time_unix_nano), "endTime": _iso(span.end_time_unix_nano),
                        "projectId": PROJECT["id"], "name": span.name, "level": "DEFAULT",
                        "type": str(attributes.get("langfuse.observation.type", "span")).upper(),
                        "environment": "default", "isRootObservation": not span.parent_span_id,
                        "input": attributes.get("langfuse.observation.input"),
                        "output": attributes.get("langfuse.observation.output"),
                        "metadata": {k[len(prefix):]: _parsed(v) for k, v in attributes.items() if k.startswith(prefix)},
                        "tags": attributes.get("langfuse.trace.tags") or [],
                        "sessionId": attributes.get("session.id"),  # Langfuse's trace-level session attribute
                    })

    def _admits(self, observation: dict, condition: dict) -> bool:
        column, operator, value = condition["column"], condition["operator"], condition.get("value")
        if (condition["type"], column, operator) == ("boolean", "isRootObservation", "="):
            return observation["isRootObservation"] == value
        if (condition["type"], column) == ("datetime", "startTime"):
            started, bound = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (observation["startTime"], value))
            return {">=": started >= bound, "<": started < bound}[operator]
        if (condition["type"], column, operator) == ("arrayOptions", "tags", "any of"):
            return bool(set(value) & set(observation["tags"]))
        if (condition["type"], column, operator) == ("stringObject", "metadata", "="):
            return str(observation["metadata"].get(condition["key"])) == value
        raise ValueError(f"filter condition not served here: {condition}")

    def list_observations(self, query: dict):
        try:
            conditions = json.loads(query["filter"][0]) if "filter" in query else []
            found = [o for o in self.observations if all(self._admits(o, c) for c in conditions)]
        except ValueError as error:
            return 400, {"message": str(error)}
        if "traceId" in query and "filter" not in query:  # query parameters count only without a filter
            found = [o for o in found if o["traceId"] == query["traceId"][0]]
        found.sort(key=lambda o: o["startTime"])
        start, limit = int(query.get("cursor", ["0"])[0]), int(query["limit"][0])
        fields = ["core", *query["fields"][0].split(",")]
        wanted = [name for group in fields for name in FIELD_GROUPS[group]]
        page = [{name: o.get(name) for name in wanted} for o in found[start:start + limit]]
        more = start + limit < len(found)
        return 200, {"data": page, "meta": {"cursor": str(start + limit) if more else None}}

    def list_scores(self, query: dict):
        found = [s for s in self.scores if s["traceId"] == query["traceId"][0]
                 and s["source"].upper() in query["source"][0].upper().split(",")]
        return 200, {"data": found, "meta": {"limit": int(query["limit"][0]), "cursor": None}}


@pytest.fixture(scope="module")
def langfuse_app():
    """The fake Langfuse with three RAG requests, a chain without retrieval and a bare retrieval,
    traced by Langfuse's own CallbackHandler; and what the app used for each RAG request. A
    TracerProvider of its own keeps the Langfuse client off the process-wide one."""
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler

    fake = FakeLangfuse()
    with LoopbackServer(fake.respond) as server:
        client = Langfuse(public_key=PUBLIC, secret_key=SECRET, host=server.url, tracer_provider=TracerProvider())
        handler = CallbackHandler(public_key=PUBLIC)
        try:
            used = run_requests([handler], lambda i: {"env": "prod" if i == 1 else "staging",
                                                      "langfuse_tags": ["nightly"] if i == 2 else [],
                                                      **({"langfuse_session_id": "chat-a"} if i < 2 else {})})
            client.flush()
        finally:
            client.shutdown()
            # the SDK keeps one client per public key for the process: a later module's fixture (this one is
            # imported by test_human_labels_langfuse) must get a fresh one, not this shut-down one
            from langfuse._client.resource_manager import LangfuseResourceManager

            LangfuseResourceManager.reset()
        roots = sorted((o for o in fake.observations if o["isRootObservation"]), key=lambda o: o["startTime"])
        assert len(roots) == 5
        server.requests.clear()  # what follows is the source's
        yield {"fake": fake, "server": server, "used": used, "roots": roots}


def source_for(app, spec: str = "langfuse:rag-app", **options) -> LangfuseSource:
    options = {"public_key": PUBLIC, "secret_key": SECRET, "host": app["server"].url, "page_size": 2, **options}
    return open_source(spec, **options)


def observation_queries(app) -> list[dict]:
    return [r.query for r in app["server"].requests if r.path == "/api/public/v2/observations"]


def root_filter(*conditions: dict) -> str:
    return json.dumps([{"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True},
                       *conditions])


def test_the_source_reconstructs_what_the_app_used(langfuse_app) -> None:
    langfuse_app["server"].requests.clear()
    source = source_for(langfuse_app)
    records = list(source.records())

    assert [(r.question, r.contexts, r.answer) for r in records] == langfuse_app["used"]
    for record, root in zip(records, langfuse_app["roots"], strict=False):  # the RAG roots come first
        assert (record.id, record.trace_id, record.span_id) == (root["traceId"], root["traceId"], root["id"])
        assert len(record.trace_id) == 32 and len(record.span_id) == 16  # OpenTelemetry ids
        assert record.metadata[SOURCE_KEY] == "langfuse:rag-app"
        assert record.metadata["env"] in ("staging", "prod") and record.metadata["is_langchain_root"] is True
        assert SCORED_KEY not in record.metadata
    assert records[2].metadata["tags"] == ["nightly"]
    assert [r.session_id for r in records] == ["chat-a", "chat-a", None]  # the trace's sessionId
    assert source.stats.as_dict() == {"traces": 5, "records": 3, "skipped": {"no retrieval": 1, "no answer": 1}}

    # the exact requests: the keys' project, the roots page by page, each trace's observations and scores
    requests = langfuse_app["server"].requests
    assert (requests[0].method, requests[0].path) == ("GET", "/api/public/projects")
    assert requests[0].headers["x-langfuse-public-key"] == PUBLIC
    sent = observation_queries(langfuse_app)
    roots = [q for q in sent if "filter" in q]
    first = {"fields": [ROOT_FIELDS], "limit": ["2"], "filter": [root_filter()]}
    assert roots == [first, {**first, "cursor": ["2"]}, {**first, "cursor": ["4"]}]
    per_trace = [q for q in sent if "traceId" in q]
    assert [q["traceId"][0] for q in per_trace if "cursor" not in q] == [r["traceId"] for r in langfuse_app["roots"]]
    assert all(q["fields"] == [TRACE_FIELDS] and q["limit"] == ["2"] for q in per_trace)
    scores = [r.query for r in requests if r.path == "/api/public/v3/scores"]
    assert scores == [{"traceId": [r["traceId"]], "source": ["API"], "fields": ["details"], "limit": ["100"]}
                      for r in langfuse_app["roots"]]


def test_since_until_limit_tags_and_metadata_are_honoured(langfuse_app) -> None:
    roots = langfuse_app["roots"]
    since = datetime.fromisoformat(roots[1]["startTime"].replace("Z", "+00:00"))
    until = datetime.fromisoformat(roots[2]["startTime"].replace("Z", "+00:00"))
    langfuse_app["server"].requests.clear()
    source = source_for(langfuse_app, "langfuse")
    assert [r.question for r in source.records(SourceFilter(since=since, until=until))] == [QUESTIONS[1]]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}
    assert observation_queries(langfuse_app)[0]["filter"] == [root_filter(
        {"type": "datetime", "column": "startTime", "operator": ">=", "value": since.isoformat()},
        {"type": "datetime", "column": "startTime", "operator": "<", "value": until.isoformat()})]
    assert "/api/public/projects" not in langfuse_app["server"].paths()  # no project named: nothing to check

    langfuse_app["server"].requests.clear()
    source = source_for(langfuse_app)
    assert [r.question for r in source.records(SourceFilter(metadata={"env": "prod"}))] == [QUESTIONS[1]]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}
    assert observation_queries(langfuse_app)[0]["filter"] == [root_filter(
        {"type": "stringObject", "column": "metadata", "key": "env", "operator": "=", "value": "prod"})]

    source = source_for(langfuse_app)
    assert [r.question for r in source.records(SourceFilter(metadata={"tag": "nightly"}))] == [QUESTIONS[2]]

    langfuse_app["server"].requests.clear()
    source = source_for(langfuse_app)
    assert [r.question for r in source.records(SourceFilter(limit=1))] == [QUESTIONS[0]]
    # streaming: one page of roots and one trace read, not the whole project
    assert sum("filter" in q for q in observation_queries(langfuse_app)) == 1
    assert {q["traceId"][0] for q in observation_queries(langfuse_app) if "traceId" in q} == {roots[0]["traceId"]}

    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert list(source_for(langfuse_app).records(SourceFilter(since=later))) == []


def test_scores_from_the_sink_land_on_the_trace_and_mark_it_scored(langfuse_app) -> None:
    fake = langfuse_app["fake"]
    try:
        (record,) = source_for(langfuse_app).records(SourceFilter(limit=1))
        sink = LangfuseSink(public_key=PUBLIC, secret_key=SECRET, host=langfuse_app["server"].url)
        sink.emit(record, [Score(metric="grounding", value=0.9, higher_is_better=True, hallucinated=False,
                                 threshold=0.5, reason="supported", record_id=record.id)])
        (stored,) = fake.scores
        sent = {k: v for k, v in stored.items() if k not in ("id", "timestamp", "createdAt", "updatedAt")}
        root = langfuse_app["roots"][0]
        assert sent == {
            "traceId": root["traceId"], "observationId": root["id"], "name": "grounding", "value": 1.0,
            "dataType": "BOOLEAN", "comment": "grounded: grounding 0.90 (threshold 0.50; higher is better)\nsupported",
            "projectId": PROJECT["id"], "source": "API", "environment": "default",
            "metadata": {"label": "grounded", "higher_is_better": True, "hallucinated": False, "threshold": 0.5,
                         "unsupported_spans": [], "record_id": root["traceId"], "value": 0.9,
                         "session_id": "chat-a"},  # read back from the trace, sent with the score
        }
        # an annotation by a person, and another API client's score, are not groundtrace's
        fake.scores += [{**stored, "id": "s2", "name": "thumbs", "source": "ANNOTATION"},
                        {**stored, "id": "s3", "name": "toxicity", "metadata": {"by": "other-tool"}}]

        records = list(source_for(langfuse_app).records())
        assert records[0].metadata[SCORED_KEY] == ["grounding"]
        assert all(SCORED_KEY not in r.metadata for r in records[1:])
    finally:
        fake.scores.clear()


def test_keys_of_another_project_say_so(langfuse_app) -> None:
    with pytest.raises(SourceError, match=r"belong to project 'rag-app', not 'billing': use that project's"):
        list(source_for(langfuse_app, "langfuse:billing").records())
    assert len(list(source_for(langfuse_app, f"langfuse:{PROJECT['id']}").records())) == 3  # an id names it too


def test_a_down_server_names_the_url_and_what_to_do(refused_url) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=rf"Langfuse at {refused_url} could not be read \(ConnectError.*"
                                          "check LANGFUSE_BASE_URL/LANGFUSE_HOST") as caught:
        list(LangfuseSource(public_key=PUBLIC, secret_key=SECRET, host=refused_url).records())
    assert SECRET not in str(caught.value)
    assert time.monotonic() - started < 5


def test_settings_come_from_the_sdks_variables(langfuse_app, monkeypatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    monkeypatch.setenv("LANGFUSE_BASE_URL", langfuse_app["server"].url)
    source = open_source("langfuse", page_size=100)
    assert [r.question for r in source.records()] == QUESTIONS
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    with pytest.raises(ValueError, match="the Langfuse source needs a public and a secret key"):
        open_source("langfuse")


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langfuse.api", None)
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("langfuse"))):
        LangfuseSource(public_key=PUBLIC, secret_key=SECRET)
