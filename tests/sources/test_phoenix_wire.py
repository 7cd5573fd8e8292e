"""The Phoenix source on the wire, against a loopback server that answers as Phoenix's REST API
does: the window and the root filter are in the query, pages follow the cursor, the API key goes
in the header, and refusals say what to do."""

from __future__ import annotations

from datetime import datetime

import pytest

pytest.importorskip("phoenix.client")

from groundtrace.sources import SourceError, SourceFilter, open_source  # noqa: E402
from tests.loopback import LoopbackServer  # noqa: E402

ROOT = {"id": "U3BhbjoyCg==", "name": "rag", "context": {"trace_id": "a" * 32, "span_id": "b" * 16},
        "span_kind": "CHAIN", "parent_id": None, "start_time": "2026-11-02T10:00:00+00:00",
        "end_time": "2026-11-02T10:00:01+00:00", "status_code": "OK",
        "attributes": {"input.value": "Where?", "output.value": "Paris.", "metadata.env": "prod"}}
RETRIEVER = {**ROOT, "id": "U3BhbjoxCg==", "name": "retrieve", "span_kind": "RETRIEVER", "parent_id": "b" * 16,
             "context": {"trace_id": "a" * 32, "span_id": "c" * 16},
             "attributes": {"input.value": "Where?", "retrieval.documents.0.document.content": "Paris is in France."}}


def phoenix_api(request):
    if request.path.endswith("/span_annotations"):
        return 200, {"data": [{"span_id": "b" * 16, "name": "grounding", "annotator_kind": "CODE",
                               "metadata": {"higher_is_better": True, "unsupported_spans": []}},
                              {"span_id": "b" * 16, "name": "grounding-by-hand", "annotator_kind": "HUMAN",
                               "metadata": {}}], "next_cursor": None}
    if request.query.get("trace_id"):
        return 200, {"data": [ROOT, RETRIEVER], "next_cursor": None}
    if "cursor" not in request.query:  # the first page of roots: one root, and a cursor
        return 200, {"data": [ROOT], "next_cursor": "U3BhbjoxCg=="}
    return 200, {"data": [], "next_cursor": None}


def test_the_query_carries_the_window_and_follows_the_cursor() -> None:
    with LoopbackServer(phoenix_api) as server:
        source = open_source("phoenix:my-app", base_url=server.url, api_key="phx-key", page_size=1)
        window = SourceFilter(since=datetime(2026, 11, 1), until=datetime(2026, 11, 3))  # naive: UTC
        (record,) = source.records(window)

    assert (record.trace_id, record.span_id, record.question, record.contexts, record.answer) == (
        "a" * 32, "b" * 16, "Where?", ["Paris is in France."], "Paris.")
    assert record.metadata["env"] == "prod" and record.metadata["groundtrace.scored"] == ["grounding"]
    spans = [r for r in server.requests if r.path == "/v1/projects/my-app/spans"]
    assert [r.query for r in spans] == [
        {"parent_id": ["null"], "start_time": ["2026-11-01T00:00:00+00:00"], "end_time": ["2026-11-03T00:00:00+00:00"],
         "limit": ["1"]},
        {"trace_id": ["a" * 32], "limit": ["1"]},
        {"parent_id": ["null"], "start_time": ["2026-11-01T00:00:00+00:00"], "end_time": ["2026-11-03T00:00:00+00:00"],
         "limit": ["1"], "cursor": ["U3BhbjoxCg=="]},
    ]
    assert all(r.headers["authorization"] == "Bearer phx-key" for r in server.requests)


def test_a_limit_stops_before_the_next_page() -> None:
    with LoopbackServer(phoenix_api) as server:
        source = open_source("phoenix:my-app", base_url=server.url, page_size=1)
        assert len(list(source.records(SourceFilter(limit=1)))) == 1
    assert not any("cursor" in r.query for r in server.requests)


def test_roots_that_fail_where_are_not_read_further() -> None:
    with LoopbackServer(phoenix_api) as server:
        source = open_source("phoenix:my-app", base_url=server.url)
        assert list(source.records(SourceFilter(metadata={"env": "staging"}))) == []
    assert source.stats.as_dict() == {"traces": 1, "records": 0, "skipped": {"filtered out": 1}}
    # every root page, but neither the traces nor the annotations of a root that failed --where
    assert {r.path for r in server.requests} == {"/v1/projects/my-app/spans"}
    assert all(r.query.get("parent_id") == ["null"] for r in server.requests)


@pytest.mark.parametrize("status, says", [
    (401, r"refused the request \(HTTP 401\): set PHOENIX_API_KEY"),
    (404, r"has no project 'my-app': use the project name shown in Phoenix"),
    (500, r"answered HTTP 500 to a span query"),
])
def test_refusals_say_what_to_do(status: int, says: str) -> None:
    with LoopbackServer(lambda request: (status, {"detail": "no"})) as server:
        with pytest.raises(SourceError, match=rf"Phoenix at {server.url} {says}"):
            list(open_source("phoenix:my-app", base_url=server.url).records())
