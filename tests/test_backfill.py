"""groundtrace score --from: read logged requests, skip what is scored or not RAG, resume, rescore."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.batch.backfill import backfill, done_ids, missing_metrics
from groundtrace.cli import app, parse_source_options, parse_when, parse_where
from groundtrace.scoring.engine import Evaluator
from groundtrace.record import Record
from groundtrace.sinks import Sink
from groundtrace.sources import SCORED_KEY, SourceFilter, open_source

runner = CliRunner()
DAY = 86_400 * 10**9
T0 = 1_795_000_000 * 10**9  # 2026-11-18T...Z in Unix nanoseconds


def attr(key: str, value: object) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, (int, float)):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def span(trace: str, span_id: str, parent: str, name: str, start: int, **attributes: object) -> dict:
    return {"traceId": trace, "spanId": span_id, "parentSpanId": parent, "name": name,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10**9),
            "attributes": [attr(k.replace("__", "."), v) for k, v in attributes.items()]}


def rag_trace(trace: str, start: int, question: str, docs: list[str], answer: str, env: str = "prod") -> list[dict]:
    root = f"{trace[:15]}1"
    retriever = {f"retrieval__documents__{i}__document__content": d for i, d in enumerate(docs)}
    return [
        span(trace, root, "", "RetrievalQA", start, openinference__span__kind="CHAIN",
             input__value=json.dumps({"question": question}), output__value=json.dumps({"answer": answer}),
             metadata=json.dumps({"env": env})),
        span(trace, f"{trace[:15]}2", root, "Retriever", start + 1, openinference__span__kind="RETRIEVER",
             input__value=question, **retriever),
        span(trace, f"{trace[:15]}3", root, "ChatModel", start + 2, openinference__span__kind="LLM",
             output__value=answer),
    ]


def write_otlp(path: Path, spans: list[dict]) -> Path:
    # the Collector's file exporter: one ExportTraceServiceRequest per line
    lines = [{"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [s]}]}]}
             for s in spans]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


A = "a" * 32
B = "b" * 32
C = "c" * 32
D = "d" * 32


def spans_for_backfill() -> list[dict]:
    """Four traces: A and D are RAG requests, B is not (no retrieval), C already carries lexical."""
    return [
        *rag_trace(A, T0, "How much is the dorm?", ["The dorm costs 1,879 roubles a month."],
                   "The dorm costs 1,879 roubles a month."),
        # a chain without retrieval: not a RAG request
        span(B, "b" * 15 + "1", "", "Summarise", T0 + DAY, openinference__span__kind="CHAIN",
             input__value="hi", output__value="hello"),
        # already carries groundtrace's lexical score
        *rag_trace(C, T0 + 2 * DAY, "When does the library open?", ["The library opens at 9."],
                   "The library opens at 8.", env="staging"),
        span(C, "c" * 15 + "9", "c" * 15 + "1", "groundtrace.lexical", T0 + 3 * DAY,
             openinference__span__kind="EVALUATOR", groundtrace__metric="lexical"),
        *rag_trace(D, T0 + 3 * DAY, "Who runs the canteen?", ["The canteen is run by Vesta LLC."],
                   "The canteen is run by Vesta LLC since 1990."),
    ]


@pytest.fixture()
def spans_file(tmp_path: Path) -> Path:
    return write_otlp(tmp_path / "spans.jsonl", spans_for_backfill())


def test_otel_json_reads_each_request_once_with_its_ids_and_skips_what_is_not_rag(spans_file: Path) -> None:
    source = open_source(f"otel-json:{spans_file}")
    records = list(source.records())
    assert [r.id for r in records] == [A, C, D]
    first = records[0]
    assert (first.question, first.contexts, first.answer) == (
        "How much is the dorm?", ["The dorm costs 1,879 roubles a month."], "The dorm costs 1,879 roubles a month.")
    assert (first.trace_id, first.span_id) == (A, "a" * 15 + "1")
    assert first.metadata["env"] == "prod" and first.metadata["groundtrace.source"] == f"otel-json:{spans_file}"
    assert records[1].metadata[SCORED_KEY] == ["lexical"]
    assert SCORED_KEY not in first.metadata
    assert source.stats.as_dict() == {"traces": 4, "records": 3, "skipped": {"no retrieval": 1}}


def test_filters_count_exactly(spans_file: Path) -> None:
    since = datetime.fromtimestamp((T0 + DAY) / 1e9, tz=timezone.utc)
    until = datetime.fromtimestamp((T0 + 3 * DAY) / 1e9, tz=timezone.utc)
    source = open_source(f"otel-json:{spans_file}")
    assert [r.id for r in source.records(SourceFilter(since=since, until=until))] == [C]
    assert source.stats.skipped == {"filtered out": 2, "no retrieval": 1}
    assert [r.id for r in open_source(f"otel-json:{spans_file}").records(SourceFilter(metadata={"env": "staging"}))] == [C]
    assert [r.id for r in open_source(f"otel-json:{spans_file}").records(SourceFilter(limit=2))] == [A, C]


def test_missing_metrics_skips_what_the_trace_carries() -> None:
    record = Record(id="x", metadata={SCORED_KEY: ["lexical"]})
    assert missing_metrics(record, ["lexical", "facts"], rescore=False) == ["facts"]
    assert missing_metrics(record, ["lexical"], rescore=False) == []
    assert missing_metrics(record, ["lexical"], rescore=True) == ["lexical"]


class ListSink(Sink):
    name = "list"

    def __init__(self) -> None:
        self.got: list[tuple[str, list[str]]] = []

    def emit(self, record: Record, scores: list) -> None:
        self.got.append((record.trace_id, [s.metric for s in scores]))


def test_backfill_scores_only_missing_metrics_delivers_and_resumes(spans_file: Path, tmp_path: Path) -> None:
    evaluator = Evaluator("lexical,facts", options={"facts": {"mode": "seed"}})
    sink = ListSink()
    output = tmp_path / "scores.jsonl"
    summary = backfill(open_source(f"otel-json:{spans_file}"), ["lexical", "facts"],
                       lambda records, select: evaluator.iter_evaluate(records, select=select),
                       sinks=[sink], output=output)
    # C already had lexical: only facts is scored for it
    assert sink.got == [(A, ["lexical", "facts"]), (C, ["facts"]), (D, ["lexical", "facts"])]
    assert summary.as_dict() == {"read": 4, "filtered": 0, "not_rag": {"no retrieval": 1}, "already_scored": 0,
                                 "already_in_output": 0, "scored": 3, "failed": 0, "sink_errors": 0}
    assert summary.settled == summary.read
    assert done_ids(output) == {A, C, D}
    again = backfill(open_source(f"otel-json:{spans_file}"), ["lexical", "facts"],
                     lambda records, select: evaluator.iter_evaluate(records, select=select), output=output)
    assert (again.scored, again.already_in_output) == (0, 3)
    assert len(output.read_text().splitlines()) == 3


def test_an_interrupted_backfill_resumes_to_the_same_output(spans_file: Path, tmp_path: Path) -> None:
    evaluator = Evaluator("lexical")

    def run(output: Path, stop_after: int | None = None) -> None:
        def score(records, select):
            for n, row in enumerate(evaluator.iter_evaluate(records, select=select)):
                if stop_after is not None and n == stop_after:
                    raise KeyboardInterrupt
                yield row
        try:
            backfill(open_source(f"otel-json:{spans_file}"), ["lexical"], score, output=output, rescore=False)
        except KeyboardInterrupt:
            pass

    whole = tmp_path / "whole.jsonl"
    run(whole)
    parts = tmp_path / "parts.jsonl"
    run(parts, stop_after=1)
    assert done_ids(parts) == {A}
    with open(parts, "a", encoding="utf-8") as handle:  # a torn line from a kill mid-write is not "done"
        handle.write('{"id": "' + D[:10])
    run(parts)
    whole_rows = {json.loads(line)["id"]: json.loads(line)["scores"] for line in whole.read_text().splitlines()}
    parts_rows = {}
    for line in parts.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        parts_rows[row["id"]] = row["scores"]
    strip = lambda rows: {k: [{**s, "latency_ms": None} for s in v] for k, v in rows.items()}  # noqa: E731
    assert strip(parts_rows) == strip(whole_rows)
    assert set(whole_rows) == {A, D}  # C already carries lexical


def test_cli_score_from_prints_the_counts_and_rescore_rewrites(spans_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["score", "--from", f"otel-json:{spans_file}", "-m", "lexical", "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert ("read 4 requests: 0 filtered out, 1 not RAG requests (1 no retrieval), 1 already scored, "
            "0 already in the output, 2 scored, 0 failed") in " ".join(result.output.split())
    result = runner.invoke(app, ["score", "--from", f"otel-json:{spans_file}", "-m", "lexical", "-o", str(output)])
    assert "2 already in the output, 0 scored" in " ".join(result.output.split())
    result = runner.invoke(app, ["score", "--from", f"otel-json:{spans_file}", "-m", "lexical", "-o", str(output),
                                 "--rescore", "--where", "env=prod"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in output.read_text().splitlines()] == [A, D]


def test_cli_score_from_errors_say_what_to_do(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no default store here
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    result = runner.invoke(app, ["score", "--from", "nosuch:x"])
    assert result.exit_code == 2 and "unknown source 'nosuch'" in result.output
    result = runner.invoke(app, ["score", "--from", f"otel-json:{tmp_path / 'missing.json'}"])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = runner.invoke(app, ["score", "--from", f"otel-json:{tmp_path}", "-S", "page_size=5"])
    assert result.exit_code == 2 and "the otel-json source has no option page_size" in result.output
    result = runner.invoke(app, ["score"])
    assert result.exit_code == 2 and "give a file of records or --from SOURCE: no file was given" in result.output
    result = runner.invoke(app, ["score", "x.jsonl", "--from", "otel-json:x"])
    assert result.exit_code == 2 and "give a file or --from SOURCE (one of the two)" in result.output
    result = runner.invoke(app, ["score", "--from", "otel-json:x", "--since", "last tuesday"])
    assert result.exit_code == 2 and "neither an ISO date/time nor an age" in result.output


def test_parse_when_and_where() -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
    assert parse_when("7d", now) == datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)
    assert parse_when("90m", now) == datetime(2026, 11, 25, 10, 30, tzinfo=timezone.utc)
    assert parse_when("2026-11-01") == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert parse_when("2026-11-01T08:00:00+02:00") == datetime(2026, 11, 1, 6, tzinfo=timezone.utc)
    assert parse_when(None) is None
    assert parse_where(["env=prod", "tier = gold"]) == {"env": "prod", "tier": "gold"}
    assert parse_source_options(["page_size=500", "match=metadata"]) == {"page_size": 500, "match": "metadata"}


def test_sdk_span_json_shape_is_read_too(tmp_path: Path) -> None:
    # the Python SDK's span.to_json(), pretty-printed one after another as ConsoleSpanExporter writes it
    def sdk(span_id: str, parent: str | None, kind: str, start: str, **attributes: object) -> str:
        return json.dumps({"name": kind.lower(), "context": {"trace_id": "0x" + A, "span_id": "0x" + span_id},
                           "parent_id": None if parent is None else "0x" + parent, "start_time": start,
                           "attributes": {"openinference.span.kind": kind, **attributes}}, indent=4)
    text = "\n".join([
        sdk("1" * 16, None, "CHAIN", "2026-11-20T10:00:00.000000Z", **{"input.value": "Q?", "output.value": "Ans."}),
        sdk("2" * 16, "1" * 16, "RETRIEVER", "2026-11-20T10:00:01.000000Z",
            **{"retrieval.documents.1.document.content": "second", "retrieval.documents.0.document.content": "first"}),
    ])
    path = tmp_path / "console.json"
    path.write_text(text, encoding="utf-8")
    [record] = open_source(f"otel-json:{path}").records()
    assert (record.question, record.contexts, record.answer, record.span_id) == ("Q?", ["first", "second"], "Ans.", "1" * 16)


def test_scores_of_an_otel_json_backfill_go_back_onto_the_same_traces_over_otlp(spans_file: Path) -> None:
    """--sinks otel in a process without a tracer provider: EVALUATOR spans over OTLP/HTTP to the
    endpoint the OpenTelemetry variables name, children of each request's root span."""
    import os
    import subprocess
    import sys

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests.loopback import LoopbackServer, Reply

    with LoopbackServer(lambda request: Reply(200, {})) as server:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": server.url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
        done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", "--from", f"otel-json:{spans_file}",
                               "-m", "lexical", "--sinks", "otel"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        posts = [r for r in server.requests if r.method == "POST"]
    assert {r.path for r in posts} == {"/v1/traces"}
    spans = []
    for post in posts:
        message = ExportTraceServiceRequest()
        message.ParseFromString(post.body)
        spans += [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    # A and D are scored; C already carried lexical; B is not a RAG request
    got = sorted((s.trace_id.hex(), s.parent_span_id.hex(), s.name) for s in spans)
    assert got == [(A, "a" * 15 + "1", "groundtrace.lexical"), (D, "d" * 15 + "1", "groundtrace.lexical")]
    attributes = {a.key: a.value for a in spans[0].attributes}
    assert attributes["openinference.span.kind"].string_value == "EVALUATOR"
    assert attributes["groundtrace.metric"].string_value == "lexical"


def test_sinks_otel_without_anywhere_to_send_says_what_to_set(spans_file: Path) -> None:
    import os
    import subprocess
    import sys

    # a fresh process: no tracer provider installed by another test, no OTLP endpoint set
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", "--from", f"otel-json:{spans_file}",
                           "-m", "lexical", "--sinks", "otel"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT" in " ".join(done.stderr.split())


def test_score_help_names_every_backfill_option_and_the_ray_extra_uncut() -> None:
    result = runner.invoke(app, ["score", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--from", "--since", "--until", "--limit", "--where", "--sinks", "--source-option", "--rescore",
                   "--engine", "--address", "--actors", "--batch-size"):
        assert option in result.output
    assert "pip install 'groundtrace[ray]'" in result.output  # rich markup must not eat [ray]
