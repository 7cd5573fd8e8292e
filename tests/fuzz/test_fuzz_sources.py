"""Fuzzed: each source's span parser (OTLP JSON files, Phoenix's REST spans, MLflow traces, LangSmith
runs, Langfuse observations) and the one assembler behind them, on arbitrary values where the
platforms allow any (inputs, outputs, attributes, metadata), and junk where a file may hold it. No
exception escapes but a SourceError that says what is wrong; every trace is counted once, as a Record
or under its reason; every Record's answer and contexts are text."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundtrace.record import Record
from groundtrace.sources import SourceError, SourceFilter, SourceStats
from groundtrace.sources.openinference import span_view
from groundtrace.sources.otel_json import OTelJsonSource
from groundtrace.sources.phoenix import phoenix_span_view
from groundtrace.sources.spans import (SpanView, answer_of, decode, documents_of, group_by_trace, question_of,
                                       records_from_traces)
from tests.fuzz.strategies import json_values, odd_text, text, values

KINDS = ["CHAIN", "RETRIEVER", "RERANKER", "LLM", "EVALUATOR", "chain", "retriever", "llm", "", "TOOL", "prompt"]
kinds = st.one_of(st.sampled_from(KINDS), odd_text)
ids = st.sampled_from(["a" * 16, "b" * 16, "c" * 16, "d" * 16])
times = st.one_of(st.none(), st.datetimes(timezones=st.just(timezone.utc)), st.datetimes())
documents = st.lists(st.one_of(text, st.fixed_dictionaries({"page_content": text}, optional={"metadata": values}),
                               st.fixed_dictionaries({"document": st.fixed_dictionaries({"content": text, "id": values})}),
                               values), max_size=3)
io_values = st.one_of(values, text.map(json.dumps), documents, documents.map(json.dumps),
                      st.fixed_dictionaries({}, optional={"question": text, "answer": text, "documents": documents,
                                                          "messages": values, "output": values}))


def check_records(made: Iterable[Record], stats: SourceStats, traces: int) -> None:
    made = list(made)
    assert stats.traces == traces == stats.records + sum(stats.skipped.values())
    assert stats.records == len(made)
    for record in made:
        assert isinstance(record.answer, str) and record.answer.strip()
        assert record.contexts and all(isinstance(c, str) for c in record.contexts)
        assert record.question is None or isinstance(record.question, str)


def assemble_all(views: Sequence[SpanView]) -> None:
    traces = list(group_by_trace(views).values())
    stats = SourceStats()
    check_records(records_from_traces(traces, "fuzz", SourceFilter(), stats), stats, len(traces))


# ------------------------------------------------------------------------ the shared readers
@settings(max_examples=300)
@given(value=io_values)
def test_question_answer_and_documents_are_text_or_nothing(value: Any) -> None:
    decode(value)
    for found in (question_of(value), answer_of(value)):
        assert found is None or (isinstance(found, str) and found.strip())
    assert all(isinstance(d.content, str) and d.content.strip() for d in documents_of(value))


# ---------------------------------------------------------------- OpenInference attributes (OTLP, Phoenix)
ATTRIBUTE_KEYS = ["openinference.span.kind", "input.value", "output.value", "metadata", "metadata.env", "tag.tags",
                  "session.id", "user.id", "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages",
                  "gen_ai.prompt", "gen_ai.completion", "groundtrace.metric",
                  "retrieval.documents.0.document.content", "retrieval.documents.1.document.content",
                  "retrieval.documents.0.document.id", "retrieval.documents.0.document.score",
                  "reranker.output_documents.0.document.content", "reranker.output_documents.0.document.score"]
attributes = st.dictionaries(st.one_of(st.sampled_from(ATTRIBUTE_KEYS), odd_text),
                             st.one_of(kinds, io_values, text), max_size=8)


@settings(max_examples=200)
@given(spans=st.lists(st.tuples(ids, st.one_of(st.none(), ids), times, attributes), max_size=5))
def test_openinference_attributes_become_views_and_traces_are_counted(spans) -> None:
    views = [span_view("t" * 32, span_id, parent, "span", start, attrs) for span_id, parent, start, attrs in spans]
    assemble_all(views)


@settings(max_examples=200)
@given(spans=st.lists(st.one_of(
    values,
    st.fixed_dictionaries({"context": st.one_of(values, st.fixed_dictionaries({"trace_id": st.one_of(ids, values),
                                                                               "span_id": st.one_of(ids, values)}))},
                          optional={"span_kind": kinds, "parent_id": st.one_of(ids, values), "name": values,
                                    "start_time": st.one_of(st.datetimes().map(datetime.isoformat), values),
                                    "attributes": st.one_of(attributes, values)})), max_size=5))
# found: a context or attributes of another type, ids that are not text (a list cannot key a trace)
@example(spans=[{"context": True}, {"context": {"trace_id": [None], "span_id": "a" * 16}},
                {"context": {"trace_id": "a" * 16, "span_id": "b" * 16}, "attributes": [["a"]]}])
def test_phoenix_rest_spans(spans) -> None:
    views = []
    for span in spans:
        view = phoenix_span_view(span) if isinstance(span, dict) else None
        if view is not None:
            views.append(view)
    assemble_all(views)


# ------------------------------------------------------------------------------ OTLP JSON files
def any_of(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right shape most of the time, anything at all sometimes."""
    return st.one_of(right, right, right, values)


otlp_values = st.one_of(*(st.fixed_dictionaries({key: strategy}) for key, strategy in [
    ("stringValue", st.one_of(text, io_values.map(lambda v: json.dumps(v, default=str)))),
    ("intValue", st.one_of(st.integers(), st.text(max_size=5))), ("doubleValue", st.one_of(st.floats(), st.text(max_size=5))),
    ("boolValue", values), ("arrayValue", any_of(st.fixed_dictionaries({"values": st.lists(values, max_size=3)}))),
    ("kvlistValue", any_of(st.fixed_dictionaries({"values": st.lists(values, max_size=3)}))), ("bytesValue", values)]))
otlp_attribute = any_of(st.fixed_dictionaries({"key": st.one_of(st.sampled_from(ATTRIBUTE_KEYS), values),
                                               "value": any_of(otlp_values)}))
otlp_span = any_of(st.fixed_dictionaries({
    "traceId": any_of(st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "S/kvNXezTaajzpKdDg5HNg==", "0x1"])),
    "spanId": any_of(ids), "parentSpanId": any_of(st.one_of(st.just(""), ids)),
    "name": any_of(st.text(max_size=8)), "startTimeUnixNano": any_of(st.integers(0, 2**63).map(str)),
    "attributes": any_of(st.lists(otlp_attribute, max_size=6)),
}))
otlp_request = any_of(st.fixed_dictionaries({"resourceSpans": any_of(st.lists(any_of(st.fixed_dictionaries({
    "scopeSpans": any_of(st.lists(any_of(st.fixed_dictionaries({"spans": any_of(st.lists(otlp_span, max_size=4))})),
                                  max_size=2))})), max_size=2))}))
sdk_span = any_of(st.fixed_dictionaries({
    "context": any_of(st.fixed_dictionaries({"trace_id": any_of(st.just("0x0af7651916cd43dd8448eb211c80319c")),
                                             "span_id": any_of(ids.map(lambda i: "0x" + i))})),
    "parent_id": any_of(st.one_of(st.none(), ids)), "name": values,
    "start_time": any_of(st.datetimes().map(datetime.isoformat)), "attributes": any_of(attributes)}))


@settings(max_examples=150)
@given(lines=st.lists(st.one_of(otlp_request, sdk_span, json_values), max_size=4),
       junk=st.one_of(st.just(""), st.just("{not json"), odd_text))
# found: an attribute without a key, a value of another shape, numbers that are no numbers, spans of
# another type, a start that is no time
@example(lines=[{"resourceSpans": [{"scopeSpans": [{"spans": [
    {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "a" * 16, "startTimeUnixNano": "9" * 30,
     "attributes": [{"value": {}}, {"key": "a", "value": {"arrayValue": None}}, {"key": "b", "value": {"intValue": ""}},
                    {"key": "c", "value": {"kvlistValue": {"values": [{"key": None}]}}}, True]}, True]}, None]}, None]}],
         junk="")
@example(lines=[{"resourceSpans": True}, {"context": {"trace_id": "0x1", "span_id": "0x2"}, "attributes": [1],
                                          "start_time": "0001-01-01T00:00:00"}], junk="")
def test_otlp_json_files(lines: list[Any], junk: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spans.jsonl"
        body = "".join(json.dumps(line, default=str) + "\n" for line in lines)
        path.write_text(body + junk, encoding="utf-8", errors="surrogatepass")
        source = OTelJsonSource(str(path))
        try:
            made = list(source.records())
        except SourceError as error:  # a file that is not JSON throughout says where it stops being JSON
            assert "not JSON at line" in str(error)
            return
    check_records(made, source.stats, source.stats.traces)


# ---------------------------------------------------------------- SDK objects: LangSmith, Langfuse, MLflow
string_maps = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)


@settings(max_examples=150)
@given(runs=st.lists(st.fixed_dictionaries({
    "run_type": kinds, "parent": st.booleans(), "inputs": st.dictionaries(st.text(max_size=8), io_values, max_size=3),
    "outputs": st.one_of(st.none(), st.dictionaries(st.sampled_from(["output", "answer", "documents", "x"]), io_values,
                                                    max_size=3)),
    "extra": st.one_of(st.none(), st.fixed_dictionaries({}, optional={"metadata": values})),
    "tags": st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=3)), "start": times}), max_size=4))
# found: the run's metadata (extra["metadata"]) is whatever the application logged, not always a dict
@example(runs=[{"run_type": "chain", "parent": False, "inputs": {}, "outputs": None, "extra": {"metadata": ["a"]},
                "tags": None, "start": None}])
def test_langsmith_runs(runs: list[dict[str, Any]]) -> None:
    langsmith = pytest.importorskip("langsmith.schemas")
    from groundtrace.sources.langsmith import run_view

    trace, root = uuid.uuid4(), uuid.uuid4()
    views = [run_view(langsmith.Run(id=root if i == 0 else uuid.uuid4(), trace_id=trace, name=f"run{i}",
                                    run_type=str(run["run_type"]), inputs=run["inputs"], outputs=run["outputs"],
                                    extra=run["extra"], tags=run["tags"], parent_run_id=root if i and run["parent"] else None,
                                    start_time=run["start"] or datetime(2026, 1, 1)))
             for i, run in enumerate(runs)]
    assemble_all(views)


@settings(max_examples=150)
@given(observations=st.lists(st.fixed_dictionaries({
    "type": kinds, "parent": st.booleans(), "input": io_values, "output": io_values,
    "metadata": st.one_of(st.none(), st.dictionaries(st.text(max_size=8), values, max_size=3)),
    "tags": st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=3)), "start": times}), max_size=4))
def test_langfuse_observations(observations: list[dict[str, Any]]) -> None:
    pytest.importorskip("langfuse")
    from langfuse.api.commons.types.observation_v2 import ObservationV2

    from groundtrace.sources.langfuse import observation_view

    fields = ObservationV2.model_fields
    views = []
    for i, o in enumerate(observations):
        made = {"id": f"o{i}", "trace_id": "t" * 32, "type": str(o["type"]), "input": o["input"], "output": o["output"],
                "metadata": o["metadata"], "tags": o["tags"], "parent_observation_id": "o0" if i and o["parent"] else None,
                "start_time": o["start"] or datetime(2026, 1, 1), "name": f"observation{i}"}
        views.append(observation_view(ObservationV2.model_construct(**{k: v for k, v in made.items() if k in fields})))
    assemble_all(views)


def mlflow_trace(spans: list[dict[str, Any]], tags: dict[str, str], metadata: dict[str, str]) -> Any:
    """An object shaped like mlflow.entities.Trace, as much of it as the source reads."""
    made = []
    for i, span in enumerate(spans):
        attributes = {"metadata": span["metadata"]}
        made.append(SimpleNamespace(
            span_id=f"s{i}", parent_id="s0" if i and span["parent"] else None, span_type=span["type"],
            name=f"span{i}", start_time_ns=span["start_ns"], inputs=span["inputs"], outputs=span["outputs"],
            get_attribute=attributes.get, to_dict=lambda span=span: {"trace_id": span["otel_id"]}))
    info = SimpleNamespace(trace_id="tr-" + "0" * 8, tags=tags, trace_metadata=metadata, assessments=[])
    return SimpleNamespace(info=info, data=SimpleNamespace(spans=made))


@settings(max_examples=150)
@given(spans=st.lists(st.fixed_dictionaries({
    "type": st.one_of(st.none(), kinds), "parent": st.booleans(), "inputs": io_values, "outputs": io_values,
    "metadata": st.one_of(values, values.map(lambda v: json.dumps(v, default=str))),
    "start_ns": st.one_of(st.none(), st.integers(0, 2**62)), "otel_id": st.one_of(st.none(), values,
                                                                                    st.just("S/kvNXezTaajzpKdDg5HNg=="))}),
    max_size=4), tags=string_maps, metadata=string_maps, match=st.sampled_from(["tags", "metadata"]))
def test_mlflow_traces(spans: list[dict[str, Any]], tags: dict[str, str], metadata: dict[str, str], match: str) -> None:
    from groundtrace.sources.mlflow import trace_views

    views, otel_id = trace_views(mlflow_trace(spans, tags, metadata), match)
    assert otel_id is None or isinstance(otel_id, str)
    assemble_all(views)


