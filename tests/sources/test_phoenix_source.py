"""``phoenix:PROJECT`` against a real ``phoenix serve`` on loopback: the LangChain and LlamaIndex
apps export over OTLP/HTTP as a deployment would; the source rebuilds exactly what they used, the
Phoenix sink's annotations land on the same root spans, and a second read knows they are scored."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("phoenix.client")
pytest.importorskip("openinference.instrumentation.langchain")
pytest.importorskip("openinference.instrumentation.llama_index")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from groundtrace.errors import install_hint
from groundtrace import Evaluator  # noqa: E402
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.sinks.phoenix import PhoenixSink  # noqa: E402
from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceError, SourceFilter, open_source  # noqa: E402
from groundtrace.sources.phoenix import PhoenixSource, is_groundtrace_annotation  # noqa: E402
from tests.sources.apps import InMemorySpanExporter, Traffic, log_traffic, tracer_provider  # noqa: E402

PROJECT = "groundtrace-source-test"


def wait_for_roots(url: str, project: str, count: int, limit_s: float = 60) -> None:
    """Phoenix ingests in the background: wait until it lists ``count`` root spans."""
    from phoenix.client import Client

    client = Client(base_url=url)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if len(client.spans.get_spans(project_identifier=project, parent_id="null", limit=1000)) >= count:
                return
        except Exception:  # the project appears with its first span
            pass
        time.sleep(0.25)
    pytest.fail(f"Phoenix did not list {count} root spans of {project} after {limit_s:g} s")


@pytest.fixture(scope="module")
def traffic(phoenix_url: str) -> Iterator[Traffic]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    otlp = OTLPSpanExporter(endpoint=f"{phoenix_url}/v1/traces", timeout=10)
    provider = tracer_provider(PROJECT, otlp, memory := InMemorySpanExporter())
    logged = log_traffic(provider, memory)
    provider.shutdown()
    wait_for_roots(phoenix_url, PROJECT, 5)
    yield logged


def read(url: str, project: str = PROJECT, **filters) -> tuple[list, dict]:
    source = open_source(f"phoenix:{project}", base_url=url, page_size=2)  # 2: every read pages
    try:
        return list(source.records(SourceFilter(**filters))), source.stats.as_dict()
    finally:
        source.close()


def by_trace(records: list) -> dict:
    return {r.trace_id: r for r in records}


def test_records_are_exactly_what_the_apps_used(phoenix_url: str, traffic: Traffic) -> None:
    records, stats = read(phoenix_url)

    # Phoenix lists the newest first
    assert [r.trace_id for r in records] == [r.trace_id for r in reversed(traffic.rag)]
    assert [r.session_id for r in records] == ["chat-b", None, "chat-a"]
    got = {r.trace_id: (r.question, r.contexts, r.answer, r.span_id) for r in records}
    assert got == {r.trace_id: (r.question, r.contexts, r.answer, r.span_id) for r in traffic.rag}
    assert stats == {"traces": 5, "records": 3, "skipped": {"no retrieval": 2}}
    for record, request in zip(records, reversed(traffic.rag), strict=True):
        assert record.metadata["env"] == request.metadata["env"]
        assert record.session_id == request.session_id  # the session.id Phoenix files the trace under
        assert record.metadata[SOURCE_KEY] == f"phoenix:{PROJECT}"
        assert SCORED_KEY not in record.metadata


def test_time_window_limit_and_metadata_filters(phoenix_url: str, traffic: Traffic) -> None:
    t = traffic
    records, stats = read(phoenix_url, since=t.middle)  # pushed down: Phoenix sends the 3 later roots only
    assert [r.trace_id for r in records] == [t.rag[2].trace_id]
    assert stats == {"traces": 3, "records": 1, "skipped": {"no retrieval": 2}}

    records, stats = read(phoenix_url, until=t.middle)
    assert [r.trace_id for r in records] == [t.rag[1].trace_id, t.rag[0].trace_id]
    assert stats == {"traces": 2, "records": 2, "skipped": {}}

    records, stats = read(phoenix_url, since=t.started, until=t.ended, limit=1)
    assert [r.trace_id for r in records] == [t.rag[2].trace_id]
    assert stats["records"] == 1

    records, stats = read(phoenix_url, metadata={"env": "staging"})
    assert [r.trace_id for r in records] == [t.rag[2].trace_id, t.rag[0].trace_id]
    assert stats == {"traces": 5, "records": 2, "skipped": {"filtered out": 3}}

    records, stats = read(phoenix_url, metadata={"tag": "nightly"})
    assert [(r.trace_id, r.metadata["tags"]) for r in records] == [(t.rag[0].trace_id, ["nightly"])]
    assert stats == {"traces": 5, "records": 1, "skipped": {"filtered out": 4}}

    assert read(phoenix_url, since=t.ended) == ([], {"traces": 0, "records": 0, "skipped": {}})


def test_scores_go_back_onto_the_same_root_spans_and_mark_the_trace_scored(phoenix_url: str, traffic: Traffic) -> None:
    from phoenix.client import Client

    records, _ = read(phoenix_url, metadata={"env": "staging"})
    sink = PhoenixSink(base_url=phoenix_url, backoff_s=0.25, max_attempts=8)
    for scored in Evaluator(["lexical"]).evaluate(records):
        sink.emit(scored.record, scored.scores)

    roots = {r.span_id: r for r in records}
    found = Client(base_url=phoenix_url).spans.get_span_annotations(span_ids=list(roots), project_identifier=PROJECT)
    assert sorted((a["span_id"], a["name"], a["annotator_kind"]) for a in found) == \
        sorted((span_id, "lexical", "CODE") for span_id in roots)
    assert all(is_groundtrace_annotation(a) and a["metadata"]["record_id"] == roots[a["span_id"]].id for a in found)
    assert all(a["result"]["score"] is not None for a in found)

    again = by_trace(read(phoenix_url)[0])
    staging = {r.trace_id for r in records}
    assert {trace_id: r.metadata.get(SCORED_KEY) for trace_id, r in again.items()} == \
        {r.trace_id: (["lexical"] if r.trace_id in staging else None) for r in traffic.rag}


def test_an_annotation_groundtrace_did_not_write_does_not_mark_a_trace_scored(phoenix_url: str, traffic: Traffic) -> None:
    from phoenix.client import Client

    prod = traffic.rag[1]
    Client(base_url=phoenix_url).spans.add_span_annotation(
        span_id=prod.span_id, annotation_name="helpfulness", annotator_kind="HUMAN", label="good", score=1.0, sync=True)
    assert SCORED_KEY not in by_trace(read(phoenix_url)[0])[prod.trace_id].metadata


def test_an_unknown_project_says_which(phoenix_url: str) -> None:
    with pytest.raises(SourceError, match=f"Phoenix at {phoenix_url} has no project 'no-such-project'"):
        read(phoenix_url, project="no-such-project")


def test_a_down_phoenix_says_where_and_what_to_do(refused_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=rf"Phoenix at {refused_url} could not be read \(ConnectError.*\); start it \(phoenix serve\)"):
        read(refused_url)
    assert time.monotonic() - started < 5


def test_the_endpoint_comes_from_the_phoenix_environment(monkeypatch, phoenix_url: str, traffic: Traffic) -> None:
    for name in ("PHOENIX_ENDPOINT", "PHOENIX_BASE_URL", "PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_CLIENT_HEADERS",
                 "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", f"{phoenix_url}/v1/traces")
    source = open_source(f"phoenix:{PROJECT}")
    assert isinstance(source, PhoenixSource) and source.sink == "phoenix"
    assert len(list(source.records(SourceFilter(limit=2)))) == 2


def test_a_missing_client_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "phoenix.client", None)
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("phoenix"))):
        open_source("phoenix:my-app", base_url="http://127.0.0.1:9")


def test_a_project_is_required() -> None:
    with pytest.raises(SourceError, match="phoenix:PROJECT"):
        open_source("phoenix")


def test_groundtrace_score_from_phoenix_annotates_and_a_rerun_skips(monkeypatch, phoenix_url: str, traffic: Traffic,
                                                                    tmp_path) -> None:
    import json

    from phoenix.client import Client
    from typer.testing import CliRunner

    from groundtrace.cli import app

    for name in ("PHOENIX_ENDPOINT", "PHOENIX_BASE_URL", "PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_API_KEY",
                 "PHOENIX_CLIENT_HEADERS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", phoenix_url)
    prod = traffic.rag[1]
    command = ["score", "--from", f"phoenix:{PROJECT}", "--where", "env=prod", "-m", "facts"]

    result = CliRunner().invoke(app, [*command, "-o", str(tmp_path / "scores.jsonl")])  # sinks: phoenix, the source's
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert (row["record"]["question"], row["record"]["contexts"], row["record"]["answer"], row["record"]["span_id"]) == \
        (prod.question, prod.contexts, prod.answer, prod.span_id)
    found = Client(base_url=phoenix_url).spans.get_span_annotations(
        span_ids=[prod.span_id], project_identifier=PROJECT, include_annotation_names=["facts"])
    assert [(a["span_id"], a["annotator_kind"]) for a in found] == [(prod.span_id, "CODE")]

    again = CliRunner().invoke(app, command)  # no -o: only what Phoenix holds says it is done
    assert again.exit_code == 0, again.output
    assert "4 filtered out, 0 not RAG requests, 1 already scored, 0 already in the output, 0 scored" in \
        " ".join(again.output.split())
