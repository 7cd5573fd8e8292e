"""``otel-json:PATH`` over what real instrumented applications wrote: a LangChain LCEL chain and a
LlamaIndex query engine traced by OpenInference's instrumentors, exported by the OpenTelemetry SDK
as OTLP JSON lines and as the SDK's ``span.to_json()``. The records are exactly what the apps used."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("openinference.instrumentation.langchain")
pytest.importorskip("openinference.instrumentation.llama_index")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceFilter, open_source  # noqa: E402
from tests.sources.apps import (  # noqa: E402
    InMemorySpanExporter, OtlpJsonLinesExporter, Traffic, log_traffic, sdk_json_exporter, tracer_provider)

SHAPES = ("otlp", "sdk")


@dataclass
class Logged:
    traffic: Traffic
    files: dict[str, Path]


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> Iterator[Logged]:
    folder = tmp_path_factory.mktemp("spans")
    files = {"otlp": folder / "otlp.jsonl", "sdk": folder / "sdk.json"}
    sdk = sdk_json_exporter(files["sdk"])
    provider = tracer_provider("otel-json-test", OtlpJsonLinesExporter(files["otlp"]), sdk, memory := InMemorySpanExporter())
    traffic = log_traffic(provider, memory)
    provider.shutdown()
    sdk.out.close()
    yield Logged(traffic, files)


def read(path: Path, **filters) -> tuple[list, dict]:
    source = open_source(f"otel-json:{path}")
    records = list(source.records(SourceFilter(**filters)))
    return records, source.stats.as_dict()


@pytest.mark.parametrize("shape", SHAPES)
def test_records_are_exactly_what_the_apps_used(logged: Logged, shape: str) -> None:
    records, stats = read(logged.files[shape])

    expected = [(r.question, r.contexts, r.answer, r.trace_id, r.span_id) for r in logged.traffic.rag]
    assert [(r.question, r.contexts, r.answer, r.trace_id, r.span_id) for r in records] == expected
    assert stats == {"traces": 5, "records": 3, "skipped": {"no retrieval": 2}}
    assert [r.id for r in records] == [r.trace_id for r in logged.traffic.rag]
    assert [r.session_id for r in records] == ["chat-a", None, "chat-b"]  # OpenInference's session.id
    assert [r.metadata["root_span"] for r in records] == ["RunnableSequence", "RunnableSequence",
                                                         "RetrieverQueryEngine.query"]
    assert all(r.metadata[SOURCE_KEY] == f"otel-json:{logged.files[shape]}" and SCORED_KEY not in r.metadata
               for r in records)


def test_both_shapes_give_the_same_records(logged: Logged) -> None:
    otlp, _ = read(logged.files["otlp"])
    sdk, _ = read(logged.files["sdk"])
    assert [r.model_dump(exclude={"metadata"}) for r in otlp] == [r.model_dump(exclude={"metadata"}) for r in sdk]


def test_a_folder_reads_every_file_once_per_trace(logged: Logged) -> None:
    # both files hold the same spans: a trace's spans seen twice are still one request
    records, stats = read(logged.files["otlp"].parent)
    assert [r.trace_id for r in records] == [r.trace_id for r in logged.traffic.rag]
    assert stats["records"] == 3


def test_contexts_keep_the_retrievers_order_and_texts(logged: Logged) -> None:
    records, _ = read(logged.files["otlp"])
    # the vector store ranks by cosine of hashed words: Baikal shares none, and ties come in insertion order
    assert records[0].contexts == ["Paris is the capital of France.", "Байкал — самое глубокое озеро в мире."]
    assert records[2].contexts == ["The dormitory fee at Saint Petersburg State University is 1,879 rubles per month.",
                                   "Плата за проживание в общежитии СПбГУ составляет 1 879 рублей в месяц."]


@pytest.mark.parametrize("shape", SHAPES)
def test_time_window_limit_and_metadata_filters(logged: Logged, shape: str) -> None:
    t = logged.traffic
    path = logged.files[shape]

    records, stats = read(path, since=t.middle)
    assert [r.trace_id for r in records] == [t.rag[2].trace_id]
    assert stats == {"traces": 5, "records": 1, "skipped": {"filtered out": 2, "no retrieval": 2}}

    records, stats = read(path, until=t.middle)
    assert [r.trace_id for r in records] == [t.rag[0].trace_id, t.rag[1].trace_id]
    assert stats == {"traces": 5, "records": 2, "skipped": {"filtered out": 3}}

    records, stats = read(path, since=t.started, until=t.ended, limit=2)
    assert [r.trace_id for r in records] == [t.rag[0].trace_id, t.rag[1].trace_id]
    assert stats == {"traces": 2, "records": 2, "skipped": {}}

    records, stats = read(path, metadata={"env": "staging"})
    assert [r.trace_id for r in records] == [t.rag[0].trace_id, t.rag[2].trace_id]
    assert [r.metadata["env"] for r in records] == ["staging", "staging"]
    assert stats == {"traces": 5, "records": 2, "skipped": {"filtered out": 3}}

    records, stats = read(path, metadata={"tag": "nightly"})
    assert [(r.trace_id, r.metadata["tags"]) for r in records] == [(t.rag[0].trace_id, ["nightly"])]
    assert stats == {"traces": 5, "records": 1, "skipped": {"filtered out": 4}}

    records, stats = read(path, since=t.ended)
    assert (records, stats) == ([], {"traces": 5, "records": 0, "skipped": {"filtered out": 5}})


def test_groundtrace_score_from_the_file_scores_exactly_those_requests(logged: Logged, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from groundtrace.cli import app

    output = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", "--from", f"otel-json:{logged.files['otlp']}", "-m", "lexical",
                                      "-o", str(output), "--sinks", "none"])
    assert result.exit_code == 0, result.output
    assert "read 5 requests: 0 filtered out, 2 not RAG requests (2 no retrieval)" in " ".join(result.output.split())
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(row["record"]["question"], row["record"]["contexts"], row["record"]["answer"], row["record"]["span_id"])
            for row in rows] == [(r.question, r.contexts, r.answer, r.span_id) for r in logged.traffic.rag]
    assert [[score["metric"] for score in row["scores"]] for row in rows] == [["lexical"]] * 3


def test_the_instrumentors_leave_nothing_behind() -> None:
    from langchain_core.callbacks import BaseCallbackManager
    from llama_index.core.instrumentation import get_dispatcher

    from tests.sources.apps import instrumented

    def hooks() -> tuple:
        dispatcher = get_dispatcher()
        return tuple(dispatcher.span_handlers), tuple(dispatcher.event_handlers), BaseCallbackManager.__init__

    before = hooks()
    with instrumented(tracer_provider("leaves-nothing")):
        during = hooks()
        # a wrapt proxy compares equal to the function it wraps: identity tells them apart
        assert (len(during[0]), len(during[1]), during[2] is before[2]) == (len(before[0]) + 1, len(before[1]) + 1, False)
    after = hooks()
    assert (after[:2], after[2] is before[2]) == (before[:2], True)


def test_a_dict_input_chain_and_a_langgraph_graph(tmp_path: Path) -> None:
    from tests.sources.apps import instrumented, langchain_rag_dict_input, langgraph_rag, root_ids

    path = tmp_path / "spans.jsonl"
    provider = tracer_provider("shapes", OtlpJsonLinesExporter(path), memory := InMemorySpanExporter())
    requests = []
    with instrumented(provider):
        for run in (lambda: langchain_rag_dict_input("When was the Eiffel Tower completed?", "In 1889."),
                    lambda: langgraph_rag("What is the capital of France?")):
            before = len(memory.get_finished_spans())
            request = run()
            request.trace_id, request.span_id = root_ids(memory, before)
            requests.append(request)
    provider.shutdown()

    # what OpenInference wrote on the roots: the dict input as JSON; the graph's one-key state as its value
    roots = [s for s in memory.get_finished_spans() if s.parent is None]
    assert json.loads(roots[0].attributes["input.value"]) == {"question": requests[0].question, "user": "u-42"}
    assert (roots[1].name, roots[1].attributes["input.value"]) == ("LangGraph", requests[1].question)
    assert json.loads(roots[1].attributes["output.value"])["answer"] == requests[1].answer

    records, stats = read(path)
    assert [(r.question, r.contexts, r.answer, r.trace_id, r.span_id) for r in records] == \
        [(r.question, r.contexts, r.answer, r.trace_id, r.span_id) for r in requests]
    assert requests[0].contexts == ["The Eiffel Tower in Paris was completed in 1889."]
    assert stats == {"traces": 2, "records": 2, "skipped": {}}
