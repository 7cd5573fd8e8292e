"""Langfuse sink against a loopback server that answers like POST /api/public/scores (the real SDK
sends; no Langfuse server can run here)."""

from __future__ import annotations

import re
import base64
import logging
import sys
import time

import pytest

from groundtrace.errors import install_hint
from groundtrace.score import Score

pytest.importorskip("langfuse")

from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.sinks import sink_class  # noqa: E402
from groundtrace.sinks.langfuse import LangfuseSink  # noqa: E402

PUBLIC, SECRET = "pk-lf-test", "sk-lf-test-secret-0123456789"
ACCEPTED = (202, {"message": "Accepted"})


def sink_for(url: str, **options) -> LangfuseSink:
    return LangfuseSink(public_key=PUBLIC, secret_key=SECRET, host=url, **options)


def test_scores_are_posted_with_trace_observation_and_reason(loopback, record, grounded, failed) -> None:
    server = loopback(lambda request: ACCEPTED)
    sink_for(server.url).emit(record, [grounded, failed])

    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/api/public/scores")
    assert request.headers["authorization"] == "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
    assert request.headers["x-langfuse-public-key"] == PUBLIC
    numeric, error = request.json
    for sent in (numeric, error):
        assert len(sent.pop("id")) == 32
        assert sent.pop("timestamp").startswith(time.strftime("%Y-", time.gmtime()))
    assert numeric == {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "observationId": "00f067aa0ba902b7",
        "name": "facts",
        "value": 1.0,  # the verdict, as Langfuse reads a number (higher is better): grounded
        "dataType": "BOOLEAN",
        "comment": 'grounded: facts 0.75 (threshold 0.50; higher is better)\nUnsupported: "built in 1850"\n'
                   "3 of 4 claims supported",
        "metadata": {
            "label": "grounded", "higher_is_better": True, "hallucinated": False, "threshold": 0.5,
            "unsupported_spans": [{"start": 17, "end": 30, "text": "built in 1850", "label": "unsupported", "score": 0.9}],
            "record_id": "r1", "value": 0.75,
        },
    }
    assert error == {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "observationId": "00f067aa0ba902b7",
        "name": "judge",
        "value": "error",
        "dataType": "CATEGORICAL",
        "comment": "timed out after 30 s",
        "metadata": {"label": "error", "higher_is_better": True, "unsupported_spans": [], "record_id": "r1"},
    }


def test_a_turn_score_stays_on_its_trace_and_names_the_conversation_in_metadata(loopback, record, grounded) -> None:
    server = loopback(lambda request: ACCEPTED)
    record.session_id = "chat-42"
    sink_for(server.url).emit(record, [grounded])

    ((sent,),) = [request.json for request in server.requests]
    # a sessionId would make it a score of the whole conversation: it judges one turn
    assert "sessionId" not in sent
    assert (sent["traceId"], sent["observationId"]) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert sent["metadata"]["session_id"] == "chat-42"


def test_settings_come_from_the_environment(loopback, monkeypatch, record, grounded) -> None:
    server = loopback(lambda request: ACCEPTED)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    monkeypatch.setenv("LANGFUSE_HOST", server.url)
    monkeypatch.delenv("LANGFUSE_BASE_URL", raising=False)
    monkeypatch.setenv("LANGFUSE_TRACING_ENVIRONMENT", "staging")
    record.span_id = None

    sink_class("langfuse")().emit(record, [grounded])

    (sent,) = server.requests[0].json
    assert sent["environment"] == "staging"
    assert sent["traceId"] == record.trace_id and "observationId" not in sent


def test_missing_keys_are_named_without_values(monkeypatch) -> None:
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    with pytest.raises(ValueError, match="LANGFUSE_PUBLIC_KEY") as caught:
        LangfuseSink()
    assert SECRET not in str(caught.value)


def test_a_record_without_trace_id_sends_nothing(loopback, record, grounded) -> None:
    server = loopback(lambda request: ACCEPTED)
    record.trace_id = None
    sink_for(server.url).emit(record, [grounded])
    assert server.requests == []


def test_a_server_error_is_retried_with_the_same_score_ids(loopback, record, grounded) -> None:
    replies = iter([(503, {"message": "busy"}), ACCEPTED])
    server = loopback(lambda request: next(replies))
    sink_for(server.url, backoff_s=0.01).emit(record, [grounded])

    first, second = (request.json for request in server.requests)
    assert first == second  # same id and timestamp: the retry updates, never duplicates


def test_rejected_scores_raise_with_the_servers_reasons(loopback, record, grounded) -> None:
    server = loopback(lambda request: (207, {"accepted": 0, "rejected": 1, "errors": [
        {"index": 0, "id": "x", "status": 400, "message": "trace not in project"}]}))
    with pytest.raises(RuntimeError, match="rejected 1 of 1 scores .*trace not in project"):
        sink_for(server.url).emit(record, [grounded])
    assert len(server.requests) == 1  # a 207 is never retried


def test_bad_credentials_fail_at_once(loopback, record, grounded) -> None:
    server = loopback(lambda request: (401, {"message": "Invalid credentials"}))
    with pytest.raises(RuntimeError, match=r"HTTP 401"):
        sink_for(server.url).emit(record, [grounded])
    assert len(server.requests) == 1


def test_a_down_server_raises_quickly_and_logs_no_secret(refused_url, record, grounded, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Langfuse scores of trace .* failed: ConnectError") as caught:
        sink_for(refused_url, max_attempts=2, backoff_s=0.05).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # refused at once, no long backoff
    assert SECRET not in str(caught.value) and SECRET not in caplog.text


def test_a_slow_server_times_out_within_the_bound(loopback, record, grounded) -> None:
    server = loopback(lambda request: (202, {"message": "Accepted"}, 10))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="ReadTimeout"):
        sink_for(server.url, timeout_s=0.3, max_attempts=2, backoff_s=0.05).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # two 0.3 s timeouts, not the server's 10 s
    assert len(server.requests) == 2


def test_through_the_monitor_scores_arrive_and_failures_are_counted(loopback, refused_url, record) -> None:
    from groundtrace.monitor import Monitor

    server = loopback(lambda request: ACCEPTED)
    working, down = sink_for(server.url), sink_for(refused_url, max_attempts=1)
    with Monitor(metrics="lexical", sinks=[working, down], flush_at_exit=False) as monitor:
        assert monitor.submit(record)
        assert monitor.flush(timeout=20)
        assert monitor.stats.sink_errors == 1
    (sent,) = server.requests[0].json
    assert (sent["name"], sent["traceId"], sent["dataType"]) == ("lexical", record.trace_id, "BOOLEAN")
    assert sent["value"] == (0.0 if sent["metadata"]["hallucinated"] else 1.0)


def test_a_score_without_a_verdict_is_sent_higher_is_better_and_a_langfuse_link_names_the_target(loopback, record):
    """grounding 0.8 without a threshold (higher means less supported) reads as 1 - 0.8 = 0.2 in Langfuse; the
    trace and observation Langfuse's own callback made (the ``langfuse`` link) win over the OpenTelemetry ids."""
    server = loopback(lambda request: ACCEPTED)
    linked = record.model_copy(update={"trace_links": {"langfuse": "0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331"}})
    raw = Score(metric="grounding", value=0.8, higher_is_better=False, record_id="r1")
    sink_for(server.url).emit(linked, [raw])
    (sent,) = server.requests[0].json
    assert (sent["traceId"], sent["observationId"]) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert (sent["value"], sent["dataType"], sent["metadata"]["value"]) == (0.2, "NUMERIC", 0.8)
    assert sent["comment"] == "grounding 0.80 (higher means less supported)"


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langfuse.api", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("langfuse"))):
        LangfuseSink(public_key=PUBLIC, secret_key=SECRET)
