"""MLflow sink: real traces in a real tracking store (sqlite in a temp folder), read back."""

from __future__ import annotations

import re
import json
import sys
import time
from collections.abc import Iterator

import pytest

mlflow = pytest.importorskip("mlflow")

from groundtrace.errors import install_hint  # noqa: E402
from groundtrace import trace_context  # noqa: E402
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.sinks import register_trace_links, sink_class  # noqa: E402
from groundtrace.sinks.mlflow import MLflowSink, active_mlflow_trace_id  # noqa: E402
from tests.mlflow_store import sqlite_tracking  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def sqlite_store(tmp_path_factory) -> Iterator[str]:
    """One store for the module: creating MLflow's tables takes seconds."""
    with sqlite_tracking(tmp_path_factory.mktemp("mlflow"), "groundtrace-sinks") as uri:
        yield uri


@pytest.fixture
def tracking_uri() -> Iterator:
    """Point MLflow somewhere else for one test, then back at the module's store."""
    previous = mlflow.get_tracking_uri()
    yield mlflow.set_tracking_uri
    mlflow.set_tracking_uri(previous)


@pytest.fixture(autouse=True)
def mlflow_links() -> None:
    """What a Monitor with an MLflow sink (or the capture kit) sets up: the MLflow trace-link lookup."""
    register_trace_links(["mlflow"])


@mlflow.trace
def answer_question(question: str) -> dict[str, str]:
    # what the adapter does while the request is live
    return trace_context.current_links()


def assessments(trace_id: str) -> dict[str, dict]:
    found = mlflow.get_trace(trace_id).info.assessments
    return {a.name: a.to_dictionary() for a in found}


def without_ids_and_times(assessment: dict) -> dict:
    return {k: v for k, v in assessment.items() if k not in ("assessment_id", "create_time", "last_update_time")}


def test_the_link_provider_reads_only_an_mlflow_the_app_imported(monkeypatch) -> None:
    assert trace_context.current_links().get("mlflow") is None  # no request is live
    links = answer_question("q")
    assert links["mlflow"].startswith("tr-")
    monkeypatch.delitem(sys.modules, "mlflow")
    assert active_mlflow_trace_id() is None


def test_feedback_and_error_land_on_the_trace(record, grounded, failed, judged) -> None:
    record.trace_links = answer_question("Where is the Eiffel Tower?")
    trace_id = record.trace_links["mlflow"]
    # emitted at once: the trace may still be in MLflow's async export queue
    sink_class("mlflow")().emit(record, [grounded, failed, judged])

    found = assessments(trace_id)
    # a judge metric's feedback says an LLM judged it, and which model
    assert found["faithfulness"]["source"] == {"source_type": "LLM_JUDGE", "source_id": "groundtrace/smollm2-135m"}
    assert without_ids_and_times(found["facts"]) == {
        "assessment_name": "facts",
        "trace_id": trace_id,
        "source": {"source_type": "CODE", "source_id": "groundtrace"},
        "feedback": {"value": True},  # the verdict (MLflow shows Pass): a number would be read higher-is-better
        "rationale": 'grounded: facts 0.75 (threshold 0.50; higher is better)\nUnsupported: "built in 1850"\n'
                     "3 of 4 claims supported",
        "metadata": {
            "label": "grounded", "higher_is_better": "true", "hallucinated": "false", "threshold": "0.5",
            "value": "0.75",
            "record_id": "r1",
            "unsupported_spans": json.dumps(
                [{"start": 17, "end": 30, "text": "built in 1850", "label": "unsupported", "score": 0.9}]),
        },
        "valid": True,
    }
    assert without_ids_and_times(found["judge"]) == {
        "assessment_name": "judge",
        "trace_id": trace_id,
        "source": {"source_type": "CODE", "source_id": "groundtrace"},
        "feedback": {"value": None,
                     "error": {"error_code": "GROUNDTRACE_METRIC_ERROR", "error_message": "timed out after 30 s"}},
        "metadata": {"label": "error", "higher_is_better": "true", "unsupported_spans": "[]", "record_id": "r1"},
        "valid": True,
    }


def test_each_assessment_names_the_conversation_in_its_metadata(record, grounded, failed) -> None:
    record.trace_links = answer_question("Where is the Eiffel Tower?")
    record.session_id = "chat-42"
    sink_class("mlflow")().emit(record, [grounded, failed])

    found = assessments(record.trace_links["mlflow"])
    assert {name: a["metadata"]["session_id"] for name, a in found.items()} == {"facts": "chat-42", "judge": "chat-42"}
    assert found["facts"]["metadata"]["record_id"] == "r1"


def test_a_langchain_chain_under_autolog_is_found_at_root_start_or_end(record, grounded) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableLambda

    class AdapterLikeHandler(BaseCallbackHandler):
        """Captures links as the groundtrace adapter does: at root start and again at root end."""

        links: dict[str, str] = {}

        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs) -> None:
            if parent_run_id is None:
                self.links = {**trace_context.current_links(), **self.links}

        def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kwargs) -> None:
            if parent_run_id is None:
                self.links = {**trace_context.current_links(), **self.links}

    mlflow.langchain.autolog()
    try:
        handler = AdapterLikeHandler()
        chain = RunnableLambda(lambda q: q.upper()) | RunnableLambda(lambda q: f"answer to {q}")
        chain.invoke("where?", config={"callbacks": [handler]})
    finally:
        mlflow.langchain.autolog(disable=True)

    record.trace_links = handler.links
    assert handler.links["mlflow"] == mlflow.get_last_active_trace_id()
    MLflowSink().emit(record, [grounded])
    assert assessments(handler.links["mlflow"])["facts"]["feedback"] == {"value": True}


def test_a_record_without_an_mlflow_trace_is_skipped(record, grounded) -> None:
    MLflowSink(timeout_s=1).emit(record, [grounded])  # no trace_links['mlflow']: nothing to do


def test_an_unknown_trace_raises_a_clear_error_after_bounded_retries(record, grounded) -> None:
    record.trace_links = {"mlflow": "tr-00000000000000000000000000000000"}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="MLflow has no trace tr-0+ after 2 attempts"):
        MLflowSink(max_attempts=2, backoff_s=0.05).emit(record, [grounded])
    assert time.monotonic() - started < 10


def test_a_down_tracking_server_raises_quickly(refused_url, tracking_uri, monkeypatch, record, grounded) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    tracking_uri(refused_url)
    record.trace_links = {"mlflow": "tr-4bf92f3577b34da6a3ce929d0e0e4736"}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="MLflow feedback on trace tr-4bf9.* failed: .*(Connection refused|Max retries)"):
        MLflowSink(timeout_s=5).emit(record, [grounded])
    assert time.monotonic() - started < 5


def test_a_slow_tracking_server_hits_the_deadline(loopback, tracking_uri, monkeypatch, record, grounded) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # keeps the abandoned call short-lived
    server = loopback(lambda request: (200, {}, 10))
    tracking_uri(server.url)
    record.trace_links = {"mlflow": "tr-4bf92f3577b34da6a3ce929d0e0e4736"}
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="MLflow feedback on trace tr-4bf9.* did not finish within 1 s"):
        MLflowSink(timeout_s=1).emit(record, [grounded])
    assert time.monotonic() - started < 5.0  # the 1 s deadline, not the server's 10 s
    assert server.requests and server.requests[0].path.startswith("/api/")


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("mlflow"))):
        MLflowSink()


def test_a_handler_built_without_arguments_links_its_first_record_to_the_mlflow_trace(monkeypatch) -> None:
    """GroundtraceCallbackHandler() builds the shared Monitor (and so its MLflow sink) lazily, after
    the first root run has read its trace links: the MLflow lookup must be in place before that."""
    pytest.importorskip("groundtrace_langchain")
    from groundtrace.capture import kit as capture
    from groundtrace_langchain import GroundtraceCallbackHandler
    from langchain_core.runnables import RunnableLambda

    trace_context.unregister_link_provider("mlflow")  # what a process that has not built the sink yet has
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")
    monkeypatch.setenv("GROUNDTRACE_SINKS", "mlflow")
    monkeypatch.setenv("GROUNDTRACE_ISOLATION", "thread")
    capture.reset_shared_monitor()
    try:
        handler = GroundtraceCallbackHandler()
        chain = RunnableLambda(lambda question: {"question": question, "answer": "The Eiffel Tower is in Paris.",
                                                 "contexts": ["The Eiffel Tower is in Paris."]})

        @mlflow.trace
        def request(question: str) -> dict:
            return chain.invoke(question, config={"callbacks": [handler]})

        request("Where is the Eiffel Tower?")
        trace_id = mlflow.get_last_active_trace_id()
        assert handler.monitor.flush(30) and handler.monitor.stats.scored == 1
        mlflow.flush_trace_async_logging()
        assert assessments(trace_id)["lexical"]["feedback"] == {"value": True}
    finally:
        trace_context.unregister_link_provider("mlflow")
        capture.reset_shared_monitor()


def test_a_monitor_with_the_sink_registers_the_lookup() -> None:
    from groundtrace.monitor import Monitor

    trace_context.unregister_link_provider("mlflow")
    assert answer_question("q").get("mlflow") is None
    with Monitor(metrics=["lexical"], sinks=["mlflow"], isolation="thread", flush_at_exit=False):
        assert answer_question("q")["mlflow"].startswith("tr-")
