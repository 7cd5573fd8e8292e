"""A sink is any object with emit(record, scores): the Monitor, `score --sinks`, the backfill and the
capture kit take a plain class, and look its optional parts (name, trace_link, flush, close,
undeliverable) up safely. The example of docs/how-to/sinks/custom.md runs in tests/docs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from groundtrace.batch.backfill import backfill
from groundtrace.cli import app
from groundtrace.batch.stream import score_stream
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from groundtrace.sinks import build_sinks, close_sinks, flush_sinks, register_trace_links, sink_name
from groundtrace.sources import Source, SourceFilter
from tests.custom_sinks import NamedSink, PlainSink

RECORDS = [
    {"id": f"r{i}", "question": "Where is the Eiffel Tower?", "contexts": ["The Eiffel Tower is in Paris."],
     "answer": answer}
    for i, answer in enumerate(["It is in Paris.", "It is in Rome, built in 1850."])
]


@pytest.fixture(autouse=True)
def fresh_class_list() -> Iterator[None]:
    PlainSink.received.clear()
    yield
    PlainSink.received.clear()


def test_a_plain_class_beside_a_named_sink_no_longer_breaks_the_monitor() -> None:
    """The issue's report: Monitor(["grounding"], [MySink(), "otel"]) raised AttributeError 'trace_link'."""
    mine, plain = NamedSink(), PlainSink()
    with Monitor(["lexical"], [mine, plain, "otel"], flush_at_exit=False) as monitor:
        for row in RECORDS:
            monitor.submit(Record(**row))
        assert monitor.flush(30)
        assert mine.flushed >= 1  # its optional flush() is called; the plain one has none and is skipped
    assert monitor.stats.sink_errors == 0 and monitor.stats.scored == 2
    for sink in (mine, plain):
        assert sorted(record.id for record, _ in sink.got) == ["r0", "r1"]
        assert all([s.metric for s in scores] == ["lexical"] and scores[0].ok for _, scores in sink.got)


def test_a_failing_plain_sink_is_named_by_its_class_and_counted(caplog) -> None:
    class Broken:
        def emit(self, record, scores):
            raise RuntimeError("the collector is down")

    with Monitor(["lexical"], [Broken(), PlainSink()], isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(Record(**RECORDS[0]))
        assert monitor.flush(30)
    assert monitor.stats.sink_errors == 1
    assert "groundtrace: sink Broken failed: record r0: RuntimeError: the collector is down" in caplog.text
    assert [record.id for record, _ in PlainSink.received] == ["r0"]  # the other sink still got it


def test_score_takes_a_sink_of_your_own_by_module_path(tmp_path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(row) + "\n" for row in RECORDS))

    result = CliRunner().invoke(app, ["score", str(answers), "-m", "lexical", "--sinks", "tests.custom_sinks:PlainSink"])

    assert result.exit_code == 0, result.output
    assert [record.id for record, _ in PlainSink.received] == ["r0", "r1"]
    assert [scores[0].metric for _, scores in PlainSink.received] == ["lexical", "lexical"]


def test_score_names_a_sink_it_cannot_load(tmp_path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(RECORDS[0]) + "\n")
    result = CliRunner().invoke(app, ["score", str(answers), "-m", "lexical", "--sinks", "tests.custom_sinks:Missing"])
    assert result.exit_code == 2
    assert "sink 'tests.custom_sinks:Missing' cannot be loaded" in result.output


class ListSource(Source):
    name = "list"

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        for row in RECORDS:
            self.stats.took()
            yield Record(**row)


def test_the_backfill_delivers_to_a_plain_sink_and_flushes_what_has_flush(tmp_path) -> None:
    plain, named = PlainSink(), NamedSink()
    summary = backfill(ListSource(), ["lexical"],
                       lambda records, select: score_stream(records, ["lexical"], select=select),
                       sinks=[plain, named], output=tmp_path / "out.jsonl")
    assert (summary.scored, summary.sink_errors) == (2, 0)
    assert [record.id for record, _ in plain.got] == ["r0", "r1"] and named.flushed == 1


def test_the_optional_parts_are_looked_up_safely() -> None:
    plain = PlainSink()
    assert sink_name(plain) == "PlainSink" and sink_name(NamedSink()) == "mine"
    assert flush_sinks([plain]) == [] and close_sinks([plain]) == []

    class FlushOnly:
        flushed = 0

        def emit(self, record, scores): ...

        def flush(self):
            self.flushed += 1

    class BadClose:
        name = "bad"

        def emit(self, record, scores): ...

        def close(self):
            raise OSError("disk full")

    flush_only = FlushOnly()
    assert close_sinks([flush_only, BadClose()]) == ["closing sink bad failed: disk full"]
    assert flush_only.flushed == 1  # closing a sink without close() flushes it


def test_a_trace_link_that_is_not_a_pair_is_ignored(caplog) -> None:
    class Odd(PlainSink):
        trace_link = "mlflow"

    register_trace_links([Odd(), PlainSink()])
    assert "sink Odd has a trace_link that is not (name, lookup): ignored" in caplog.text


def test_what_cannot_be_a_sink_is_refused_with_the_reason() -> None:
    with pytest.raises(TypeError, match="PlainSink is a class: pass an instance"):
        build_sinks([PlainSink])
    with pytest.raises(TypeError, match="a sink needs an emit"):
        build_sinks([object()])

