"""``otel-json`` on hand-written files: both id encodings, typed OTLP values, folders, and the
errors a user gets for a missing path or a file that is not JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from groundtrace.sources import SourceError, open_source

TRACE, ROOT, RETRIEVER = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "53995c3f42cd8ad8"


def attribute(key: str, value) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}  # OTLP JSON writes 64-bit ints as text
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": v} for v in value]}}}
    return {"key": key, "value": {"stringValue": value}}


def otlp(encode, spans: list[dict]) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [attribute("service.name", "rag")]},
                               "scopeSpans": [{"scope": {"name": "openinference"}, "spans": [
        {"traceId": encode(TRACE), "spanId": encode(span["id"]), "parentSpanId": encode(span["parent"]) if span["parent"] else "",
         "name": span["name"], "startTimeUnixNano": str(span["start"]),
         "attributes": [attribute(k, v) for k, v in span["attributes"].items()]} for span in spans]}]}]}


SPANS = [
    {"id": RETRIEVER, "parent": ROOT, "name": "retrieve", "start": 1_790_000_000_100_000_000, "attributes": {
        "openinference.span.kind": "RETRIEVER", "input.value": "Eiffel Tower",
        "retrieval.documents.0.document.content": "The Eiffel Tower is in Paris.",
        "retrieval.documents.0.document.score": 0.5, "retrieval.documents.0.document.id": "d0"}},
    {"id": ROOT, "parent": None, "name": "rag", "start": 1_790_000_000_000_000_000, "attributes": {
        "openinference.span.kind": "CHAIN", "input.value": '{"question": "Where is it?"}', "output.value": "In Paris.",
        "tag.tags": ["nightly"], "llm.token_count.total": 12, "cached": True}},
]


def hex_id(value: str) -> str:
    return value


def base64_id(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode()


@pytest.mark.parametrize("encode", [hex_id, base64_id], ids=["hex", "base64"])
def test_otlp_json_with_either_id_encoding(tmp_path: Path, encode) -> None:
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(otlp(encode, SPANS), indent=2))
    (record,) = open_source(f"otel-json:{path}").records()
    assert (record.trace_id, record.span_id, record.question, record.contexts, record.answer) == (
        TRACE, ROOT, "Where is it?", ["The Eiffel Tower is in Paris."], "In Paris.")
    assert record.metadata["tags"] == ["nightly"]
    assert record.metadata["started"] == "2026-09-21T14:13:20+00:00"


def test_a_trace_split_across_lines_and_files_is_one_request(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(otlp(hex_id, SPANS[:1])) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(otlp(hex_id, SPANS[1:])) + "\n")
    (tmp_path / "notes.txt").write_text("not read")
    source = open_source(f"otel-json:{tmp_path}")
    assert [r.span_id for r in source.records()] == [ROOT]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}


def test_the_errors_say_which_file_and_where(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(otlp(hex_id, SPANS)) + '\n{"resourceSpans": [\n')
    with pytest.raises(SourceError, match=r"broken.jsonl: not JSON at line 3, column 1"):
        list(open_source(f"otel-json:{broken}").records())
    with pytest.raises(SourceError, match="does not exist"):
        list(open_source(f"otel-json:{tmp_path / 'missing.json'}").records())
    with pytest.raises(SourceError, match="otel-json needs a path"):
        list(open_source("otel-json").records())


def test_spans_without_ids_and_unknown_json_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    nameless = otlp(lambda value: "", SPANS)
    path.write_text("\n".join(json.dumps(v) for v in (nameless, {"something": "else"}, [1, 2], "text")))
    source = open_source(f"otel-json:{path}")
    assert list(source.records()) == []
    assert source.stats.as_dict() == {"traces": 0, "records": 0, "skipped": {}}
