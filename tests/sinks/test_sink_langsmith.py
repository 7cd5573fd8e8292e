"""LangSmith sink: the real SDK against a loopback server answering LangSmith's endpoints."""

from __future__ import annotations

import re
import logging
import sys
import time

import pytest

langsmith = pytest.importorskip("langsmith")

from groundtrace.errors import install_hint  # noqa: E402
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.sinks import sink_class  # noqa: E402
from groundtrace.sinks.langsmith import LangSmithSink  # noqa: E402
from tests.langsmith_api import multipart_json  # noqa: E402

API_KEY = "lsv2_pt_test_secret_0123456789abcdef"
PROJECT_ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
TENANT_ID = "a3bb189e-8bf9-4888-9912-ace4e6543002"
INFO = {"version": "0.12.40", "instance_flags": {}, "batch_ingest_config": {
    "use_multipart_endpoint": True, "scale_up_qsize_trigger": 1000, "scale_up_nthreads_limit": 16,
    "scale_down_nempty_trigger": 4, "size_limit": 100, "size_limit_bytes": 20971520}}


#: the grounded fixture's comment: the verdict, the rounded value, the threshold, the direction, the phrase, the reason
COMMENT = 'grounded: facts 0.75 (threshold 0.50; higher is better)\nUnsupported: "built in 1850"\n3 of 4 claims supported'

def langsmith_api(feedback_replies=None):
    """A responder for /info, /sessions (project lookup) and /feedback; feedback replies in order."""
    replies = iter(feedback_replies or [])

    def respond(request):
        if request.path == "/info":
            return 200, INFO
        if request.path == "/sessions":
            name = request.query["name"][0]
            return 200, [{"id": PROJECT_ID, "name": name, "tenant_id": TENANT_ID, "reference_dataset_id": None,
                          "start_time": "2026-01-01T00:00:00Z"}]
        if request.path == "/feedback":
            return next(replies, (200, {"id": "ok"}))
        return 404, {"detail": "Not Found"}

    return respond


def sink_for(url: str, **options) -> LangSmithSink:
    return LangSmithSink(api_url=url, api_key=API_KEY, project_name="rag-staging", **options)


def posted_feedback(server) -> list[dict]:
    return [r.json for r in server.requests if (r.method, r.path) == ("POST", "/feedback")]


def test_feedback_lands_on_the_root_run_with_score_label_and_reason(loopback, record, grounded) -> None:
    server = loopback(langsmith_api())
    sink = sink_for(server.url)
    sink.emit(record, [grounded])
    sink.close()

    (sent,) = posted_feedback(server)
    for generated in ("id", "created_at", "modified_at"):
        assert sent.pop(generated)
    assert sent == {
        "run_id": record.run_id,
        "trace_id": record.run_id,
        "session_id": PROJECT_ID,
        "key": "facts",
        "score": 1.0,  # the verdict, as LangSmith reads a score (higher is better): grounded
        "value": "grounded",
        "comment": COMMENT,
        "feedback_source": {"type": "model", "metadata": {"name": "groundtrace"}},
        "extra": {
            "value": 0.75,
            "higher_is_better": True, "hallucinated": False, "threshold": 0.5, "record_id": "r1",
            "unsupported_spans": [{"start": 17, "end": 30, "text": "built in 1850", "label": "unsupported", "score": 0.9}],
        },
        "extend_trace_retention": True,
    }
    lookup = next(r for r in server.requests if r.path == "/sessions")
    assert lookup.query["name"] == ["rag-staging"]
    assert lookup.headers["x-api-key"] == API_KEY


def test_the_conversation_goes_in_extra_and_the_project_stays_the_session_field(loopback, record, grounded) -> None:
    server = loopback(langsmith_api())
    record.session_id = "chat-42"
    sink_for(server.url).emit(record, [grounded])

    (sent,) = posted_feedback(server)
    assert (sent["session_id"], sent["extra"]["session_id"]) == (PROJECT_ID, "chat-42")
    assert sent["extra"]["record_id"] == "r1"


def test_an_error_score_is_error_feedback_without_a_score(loopback, record, failed) -> None:
    server = loopback(langsmith_api())
    sink_for(server.url).emit(record, [failed])

    (sent,) = posted_feedback(server)
    assert {k: sent.get(k) for k in ("key", "score", "value", "comment", "error")} == {
        "key": "judge", "score": None, "value": "error", "comment": "timed out after 30 s", "error": True}
    assert "score" not in sent


def test_the_adapters_project_wins_and_is_looked_up_once(loopback, record, grounded, failed) -> None:
    server = loopback(langsmith_api())
    record.trace_links["langsmith_project"] = "per-call-project"
    sink = sink_for(server.url)
    sink.emit(record, [grounded])
    sink.emit(record, [failed])

    lookups = [r.query["name"] for r in server.requests if r.path == "/sessions"]
    assert lookups == [["per-call-project"]]
    assert [f["session_id"] for f in posted_feedback(server)] == [PROJECT_ID, PROJECT_ID]


def test_settings_come_from_the_environment(loopback, monkeypatch, record, grounded) -> None:
    server = loopback(langsmith_api())
    monkeypatch.setenv("LANGSMITH_ENDPOINT", server.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", API_KEY)
    monkeypatch.setenv("LANGSMITH_PROJECT", "from-env")
    # the SDK reads its variables once per process (lru_caches): a test that runs after another LangSmith user
    # would see that one's
    from langsmith import utils as ls_utils

    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()

    sink_class("langsmith")().emit(record, [grounded])

    assert [r.query["name"] for r in server.requests if r.path == "/sessions"] == [["from-env"]]
    assert posted_feedback(server)[0]["run_id"] == record.run_id


def test_a_record_without_run_id_is_skipped(loopback, record, grounded) -> None:
    server = loopback(langsmith_api())
    record.run_id = None
    sink_for(server.url).emit(record, [grounded])
    assert server.requests == []


def test_a_run_not_yet_ingested_is_retried(loopback, record, grounded) -> None:
    server = loopback(langsmith_api([(404, {"detail": "run not found"}), (200, {"id": "ok"})]))
    sink_for(server.url, max_attempts=2).emit(record, [grounded])
    first, second = posted_feedback(server)
    assert first == second


def test_a_ready_batching_client_is_drained_by_flush(loopback, record, grounded) -> None:
    server = loopback(langsmith_api())
    client = langsmith.Client(api_url=server.url, api_key=API_KEY, auto_batch_tracing=True)
    sink = LangSmithSink(client, project_name="rag-staging")
    sink.emit(record, [grounded])
    sink.flush(timeout_s=10)

    assert "/feedback" not in server.paths("POST")  # it went through the client's background queue
    (batch,) = [r for r in server.requests if r.path == "/runs/multipart"]
    (name, sent), = multipart_json(batch).items()
    assert name == f"feedback.{sent['id']}"
    assert {k: sent[k] for k in ("run_id", "trace_id", "session_id", "key", "score", "value", "comment")} == {
        "run_id": record.run_id, "trace_id": record.run_id, "session_id": PROJECT_ID, "key": "facts",
        "score": 1.0, "value": "grounded", "comment": COMMENT}


def test_a_down_server_raises_quickly_without_the_key(refused_url, record, grounded, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="LangSmith project 'rag-staging' lookup failed: LangSmithConnectionError") as caught:
        sink_for(refused_url).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # refused at once, no long backoff
    assert API_KEY[5:-2] not in str(caught.value) and API_KEY[5:-2] not in caplog.text


def test_a_slow_server_times_out_within_the_bound(loopback, record, grounded) -> None:
    api = langsmith_api()
    server = loopback(lambda request: (200, {"id": "late"}, 10) if request.path == "/feedback" else api(request))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="LangSmith feedback 'facts' on run .* failed: ReadTimeout"):
        sink_for(server.url, timeout_s=0.5, max_attempts=1).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # one 0.5 s timeout, not the server's 10 s


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langsmith", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("langsmith"))):
        LangSmithSink(api_key=API_KEY)
