"""``otel-json:PATH``: spans written as JSON, read with the OpenInference conventions.

Two shapes, in one file or several (PATH may be a folder: every ``*.json``/``*.jsonl`` in it):

- OTLP JSON, as the OpenTelemetry Collector's file exporter and OTLP/HTTP JSON write it:
  ``{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId", "spanId", "parentSpanId",
  "startTimeUnixNano", "attributes": [{"key", "value": {"stringValue": ...}}]}]}]}]}``, one object
  per line or one per file; ids in hex (as the JSON encoding of OTLP says) or base64;
- the Python SDK's ``span.to_json()`` (ConsoleSpanExporter, or a file exporter writing it), one
  span per line or pretty-printed one after another: ``{"context": {"trace_id": "0x..."},
  "parent_id", "start_time", "attributes": {...}}``.

Attributes are read by :func:`groundtrace.sources.openinference.span_view` (OpenInference, else
GenAI conventions), as Phoenix's are; groundtrace's own EVALUATOR spans (``groundtrace.metric``)
mark a trace as already scored.

The file is read whole into spans grouped by trace (a trace's spans may lie anywhere in it); the
Records then stream.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from groundtrace.sources import Source, SourceError, SourceFilter
from groundtrace.sources.openinference import span_view
from groundtrace.sources.spans import SpanView, as_mapping, group_by_trace, records_from_traces, trace_start

_HEX = re.compile(r"^(0x)?[0-9a-fA-F]+$")


# ---------------------------------------------------------------------------- JSON shapes
# A file may hold anything: every level is read only where it has the shape OTLP gives it, and
# whatever has another shape is passed over (a span without usable ids, an attribute without a key).
def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _otlp_value(value: Any) -> Any:
    """An OTLP AnyValue as a Python value; None for what is not one."""
    value = as_mapping(value)
    try:
        if "stringValue" in value:
            return value["stringValue"] if isinstance(value["stringValue"], str) else None
        if "intValue" in value:
            return int(value["intValue"])
        if "doubleValue" in value:
            return float(value["doubleValue"])
    except (TypeError, ValueError, OverflowError):
        return None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in _items(as_mapping(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return _otlp_attributes(as_mapping(value["kvlistValue"]).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _otlp_attributes(items: Any) -> dict[str, Any]:
    """OTLP's list of {"key", "value"} as a dict; entries of any other shape are passed over."""
    return {kv["key"]: _otlp_value(kv.get("value")) for kv in _items(items)
            if isinstance(kv, Mapping) and isinstance(kv.get("key"), str)}


def _hex_id(raw: Any, digits: int) -> str | None:
    """A trace (32 digits) or span (16) id as lower-case hex, from hex, 0x-hex or base64."""
    if not raw or not isinstance(raw, str):
        return None
    if _HEX.match(raw) and len(raw.removeprefix("0x")) <= digits:
        text = raw.removeprefix("0x").lower().rjust(digits, "0")
    else:
        try:
            text = base64.b64decode(raw, validate=True).hex()
        except (binascii.Error, ValueError):
            return None
    return None if set(text) <= {"0"} else text


def _nanos(raw: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(raw) / 1e9, tz=timezone.utc) if raw not in (None, "", 0, "0") else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _iso(raw: Any) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def _text(raw: Any) -> str:
    return raw if isinstance(raw, str) else ""


def _raw_spans(value: Any) -> Iterator[tuple[str | None, str | None, str | None, str, datetime | None, dict[str, Any]]]:
    """(trace id, span id, parent id, name, start, attributes) of every span in one JSON value."""
    if isinstance(value, list):
        for item in value:
            yield from _raw_spans(item)
        return
    if not isinstance(value, Mapping):
        return
    if "resourceSpans" in value:  # OTLP
        for resource in _items(value.get("resourceSpans")):
            resource = as_mapping(resource)
            for scope in _items(resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans")):
                for span in _items(as_mapping(scope).get("spans")):
                    span = as_mapping(span)
                    yield (_hex_id(span.get("traceId"), 32), _hex_id(span.get("spanId"), 16),
                           _hex_id(span.get("parentSpanId"), 16), _text(span.get("name")),
                           _nanos(span.get("startTimeUnixNano")), _otlp_attributes(span.get("attributes")))
    elif isinstance(value.get("context"), Mapping):  # the SDK's span.to_json()
        context = value["context"]
        yield (_hex_id(context.get("trace_id"), 32), _hex_id(context.get("span_id"), 16),
               _hex_id(value.get("parent_id"), 16), _text(value.get("name")), _iso(value.get("start_time")),
               dict(as_mapping(value.get("attributes"))))


def _json_values(text: str) -> Iterator[Any]:
    """Every JSON value in a text of values one after another (JSON Lines, or pretty-printed)."""
    decoder = json.JSONDecoder()
    position, end = 0, len(text)
    while position < end:
        while position < end and text[position].isspace():
            position += 1
        if position >= end:
            return
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise SourceError(f"not JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
        yield value


def read_span_views(path: Path) -> list[SpanView]:
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    views = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise SourceError(f"cannot read {file}: {error}") from None
        try:
            for value in _json_values(text):
                for trace_id, span_id, parent_id, name, start, attributes in _raw_spans(value):
                    if trace_id and span_id:
                        views.append(span_view(trace_id, span_id, parent_id, name, start, attributes))
        except SourceError as error:
            raise SourceError(f"{file}: {error}") from None
    return views


class OTelJsonSource(Source):
    """``otel-json:PATH``: OTLP JSON or the SDK's span JSON, in a file or a folder of files."""

    name = "otel-json"
    sink = None  # a file cannot take scores back: use --sinks otel (an OTLP exporter) or -o

    def records(self, filters: SourceFilter | None = None) -> Iterator[Any]:
        filters = filters or SourceFilter()
        if not self.target:
            raise SourceError("otel-json needs a path: otel-json:spans.json")
        path = Path(self.target)
        if not path.exists():
            raise SourceError(f"{path} does not exist")
        ordered = sorted(group_by_trace(read_span_views(path)).values(), key=trace_start)
        yield from records_from_traces(ordered, self.spec, filters, self.stats)


__all__ = ["OTelJsonSource", "read_span_views", "span_view"]
