"""The mask and GROUNDTRACE_CAPTURE_TEXT: applied once when a Record is taken in, before any metric or
sink sees it, through every entry point of the core (Monitor, Evaluator, score_stream, the backfill,
the command line, the environment). The integrations' own tests run real chains and engines."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from groundtrace.batch.backfill import backfill
from groundtrace.cli import app
from groundtrace.config import Settings
from groundtrace.scoring.engine import Evaluator, evaluate
from groundtrace.metrics.lexical import LexicalMetric
from groundtrace.monitor import Monitor
from groundtrace.privacy import chain_masks, load_mask, masked_items, without_text
from groundtrace.record import InvalidInput, Record
from groundtrace.score import Score, Span
from groundtrace.sources import Source, SourceFilter
from groundtrace.batch.stream import score_stream
from tests.custom_sinks import PlainSink
from tests.privacy_masks import hide_emails, refuse

ANSWER = "Write to anna.petrova@example.com about the dormitory fee of 1 879 roubles, not 2 500."
ROW = {"id": "r1", "question": "Who answers dorm.office@spbu.ru about the fee?",
       "contexts": ["The dormitory fee is 1 879 roubles; ask anna.petrova@example.com."], "answer": ANSWER,
       "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
MASKED_ANSWER = "Write to <email> about the dormitory fee of 1 879 roubles, not 2 500."


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch) -> None:
    for name in ("GROUNDTRACE_MASK", "GROUNDTRACE_CAPTURE_TEXT"):
        monkeypatch.delenv(name, raising=False)


def assert_masked(record: Record) -> None:
    assert "@" not in " ".join([record.question or "", *(record.contexts or []), record.answer or ""])
    assert record.answer == MASKED_ANSWER


def assert_spans_point_into(answer: str, scores: list[Score]) -> None:
    spans = [span for score in scores for span in score.spans]
    assert spans, "the metric flagged nothing: the test would show nothing"
    assert all(answer[span.start:span.end] == span.text for span in spans)


class CountingLexical(LexicalMetric):
    """lexical, counting the records it is asked to score (a metric must not see a failed record)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str | None] = []
        self._lock = threading.Lock()

    def score(self, record):  # type: ignore[no-untyped-def]
        with self._lock:
            self.seen.append(getattr(record, "answer", None))
        return super().score(record)


# ------------------------------------------------------------------------------------ Monitor
def test_the_monitor_scores_and_delivers_the_masked_text_with_true_offsets() -> None:
    sink, metric = PlainSink(), CountingLexical()
    with Monitor([metric], [sink], mask=hide_emails, flush_at_exit=False) as monitor:
        monitor.submit(Record(**ROW))
        assert monitor.flush(30)
    [(record, scores)] = sink.got
    assert_masked(record)
    assert metric.seen == [MASKED_ANSWER]
    assert_spans_point_into(MASKED_ANSWER, scores)
    assert (record.trace_id, record.span_id) == (ROW["trace_id"], ROW["span_id"])


def test_a_mask_that_raises_scores_nothing_and_sends_only_the_id_and_the_errors(caplog) -> None:
    sink, metric = PlainSink(), CountingLexical()
    with Monitor([metric], [sink], mask=refuse, flush_at_exit=False) as monitor:
        monitor.submit(Record(**ROW))
        assert monitor.flush(30)
        assert (monitor.stats.failed, monitor.stats.scored) == (1, 0)
    assert metric.seen == [None]  # asked only to write its error Score for the withheld record
    [(record, [score])] = sink.got
    assert record.model_dump(exclude_defaults=True) == {"id": "r1"}
    assert score.error == score.reason == ("invalid record: the mask raised ValueError (its message is not shown: "
                                           "it may quote the text); nothing of this record was scored or sent")
    assert "anna" not in caplog.text and "dormitory" not in caplog.text


def test_a_handlers_mask_runs_before_the_monitors_own() -> None:
    sink = PlainSink()
    with Monitor(["lexical"], [sink], mask=str.upper, isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(Record(**ROW), mask=hide_emails)
        assert monitor.flush(30)
    [(record, _)] = sink.got
    assert record.answer == MASKED_ANSWER.upper()  # "<EMAIL>": hidden first, then upper-cased
    assert chain_masks(None, None) is None and chain_masks(hide_emails, None) is hide_emails


def test_capture_text_off_gives_the_sinks_values_verdicts_and_offsets_only() -> None:
    sink = PlainSink()
    with Monitor(["lexical", "facts"], [sink], capture_text=False, isolation="thread", flush_at_exit=False) as monitor:
        monitor.submit(Record(**ROW, metadata={"user": "anna.petrova@example.com"}))
        assert monitor.flush(30)
    [(record, scores)] = sink.got
    assert record.model_dump(exclude_defaults=True) == {"id": "r1", "trace_id": ROW["trace_id"],
                                                        "span_id": ROW["span_id"]}
    assert all(score.ok and score.value is not None and score.hallucinated is not None for score in scores)
    assert any(score.spans for score in scores)
    for score in scores:
        assert score.reason == ""
        assert all(span.text == "" and span.end > span.start for span in score.spans)
        assert "anna" not in json.dumps(score.details) and "roubles" not in json.dumps(score.details)


def test_a_monitor_takes_what_it_is_not_given_from_the_environment_through_the_settings(monkeypatch) -> None:
    monkeypatch.setenv("GROUNDTRACE_MASK", "tests.privacy_masks:hide_emails")
    monkeypatch.setenv("GROUNDTRACE_CAPTURE_TEXT", "false")
    with Monitor(["lexical"], [PlainSink()], isolation="thread", flush_at_exit=False) as monitor:
        assert monitor.mask is hide_emails and monitor.capture_text is False  # not passed: the environment's
        assert not monitor.shows_raw_text
    with Monitor(["lexical"], [PlainSink()], isolation="thread", settings=Settings(), flush_at_exit=False) as monitor:
        assert monitor.mask is None and monitor.capture_text is True  # given settings: no variable is read
        assert monitor.shows_raw_text
    settings = Settings.from_env()  # config.py reads the environment, once
    for monitor in (Monitor.from_settings(settings, metrics=["lexical"], sinks=[], flush_at_exit=False),
                    Monitor(["lexical"], [], settings=settings, flush_at_exit=False)):
        with monitor:
            assert monitor.mask is hide_emails and monitor.capture_text is False
            assert not monitor.shows_raw_text
    with Monitor.from_settings(settings, metrics=["lexical"], sinks=[], mask=str.lower, capture_text=True,
                               flush_at_exit=False) as monitor:
        assert monitor.mask is str.lower and monitor.capture_text is True  # arguments win


def test_the_shared_monitor_of_instrument_and_groundtrace_run_takes_both_from_the_environment(monkeypatch) -> None:
    from groundtrace.capture import kit as capture

    monkeypatch.setenv("GROUNDTRACE_MASK", "tests.privacy_masks:hide_emails")
    monkeypatch.setenv("GROUNDTRACE_CAPTURE_TEXT", "false")
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")
    monkeypatch.setenv("GROUNDTRACE_ISOLATION", "thread")
    capture.reset_shared_monitor()
    try:
        monitor = capture.shared_monitor()
        assert monitor.mask is hide_emails and monitor.capture_text is False
    finally:
        capture.reset_shared_monitor()


def test_settings_read_the_mask_and_refuse_a_capture_flag_that_is_no_flag() -> None:
    settings = Settings.from_env({"GROUNDTRACE_MASK": "tests.privacy_masks:hide_emails",
                                  "GROUNDTRACE_CAPTURE_TEXT": "off"})
    assert (settings.mask, settings.capture_text) == ("tests.privacy_masks:hide_emails", False)
    assert Settings.from_env({}).capture_text is True
    with pytest.raises(ValueError, match="GROUNDTRACE_CAPTURE_TEXT='flase' is not a flag"):
        Settings.from_env({"GROUNDTRACE_CAPTURE_TEXT": "flase"})


def test_a_mask_that_cannot_be_loaded_stops_the_monitor_from_starting() -> None:
    with pytest.raises(ValueError, match="module:function"):
        load_mask("hide_emails")
    with pytest.raises(ValueError, match="cannot be loaded"):
        Monitor(["lexical"], [], mask="tests.privacy_masks:nothing_here", flush_at_exit=False)
    with pytest.raises(ValueError, match="not a function"):
        load_mask("tests.privacy_masks:EMAIL.pattern")


# ------------------------------------------------------------------------------------- batch
def test_the_evaluator_masks_before_scoring_and_a_failed_mask_leaves_an_id_and_errors() -> None:
    [row] = Evaluator(["lexical"], mask=hide_emails).evaluate([ROW])
    assert_masked(row.record)
    assert_spans_point_into(MASKED_ANSWER, row.scores)

    [failed, bad_input] = evaluate([ROW, {"id": "x", "answer": 42}], ["lexical", "facts"], mask=refuse)
    assert failed.record.model_dump(exclude_defaults=True) == {"id": "r1"}
    assert [s.metric for s in failed.scores] == ["lexical", "facts"]
    assert all(s.error.startswith("invalid record: the mask raised ValueError") for s in failed.scores)
    assert "field 'answer'" in bad_input.scores[0].error  # not a record: its usual error, the mask never ran


def test_score_stream_masks_on_this_machine_before_any_engine() -> None:
    items = list(masked_items([ROW, {"id": "x", "answer": 42}], hide_emails))
    assert_masked(items[0])
    assert items[1] == {"id": "x", "answer": 42}
    [withheld] = masked_items([ROW], refuse)
    assert isinstance(withheld, InvalidInput) and withheld.id == "r1" and "anna" not in withheld.message
    [row] = score_stream([ROW], ["lexical"], mask="tests.privacy_masks:hide_emails")
    assert_masked(row.record)


class OneRecord(Source):
    name = "one"

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        self.stats.took()
        yield Record(**ROW)


@pytest.mark.parametrize("capture_text", [True, False])
def test_the_backfill_masks_what_it_reads(tmp_path, capture_text) -> None:
    sink = PlainSink()
    output = tmp_path / "out.jsonl"
    summary = backfill(OneRecord(), ["lexical"], lambda records, select: score_stream(records, ["lexical"], select=select),
                       sinks=[sink], output=output, mask=hide_emails, capture_text=capture_text)
    assert summary.scored == 1
    written = json.loads(output.read_text())
    assert written["record"]["answer"] == MASKED_ANSWER  # -o is your own file: the masked text
    [(record, scores)] = sink.got
    if capture_text:
        assert_masked(record)
        assert_spans_point_into(MASKED_ANSWER, scores)
    else:
        assert record.answer is None and all(span.text == "" for s in scores for span in s.spans)


def test_the_command_line_takes_the_mask_and_capture_text_from_the_environment(tmp_path, monkeypatch) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "id": "r2"}) + "\n")
    monkeypatch.setenv("GROUNDTRACE_MASK", "tests.privacy_masks:hide_emails")
    monkeypatch.setenv("GROUNDTRACE_CAPTURE_TEXT", "false")
    monkeypatch.setenv("GROUNDTRACE_JSONL_PATH", str(tmp_path / "sink.jsonl"))

    result = CliRunner().invoke(app, ["score", str(answers), "-m", "lexical", "-o", str(tmp_path / "out.jsonl"),
                                      "--sinks", "jsonl"])

    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [row["record"]["answer"] for row in written] == [MASKED_ANSWER] * 2
    delivered = (tmp_path / "sink.jsonl").read_text()
    assert "dormitory" not in delivered and "@" not in delivered and '"value":' in delivered


def test_the_command_line_writes_an_id_and_errors_for_a_record_the_mask_fails_on(tmp_path, monkeypatch) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ROW) + "\n")
    monkeypatch.setenv("GROUNDTRACE_MASK", "tests.privacy_masks:refuse")

    result = CliRunner().invoke(app, ["score", str(answers), "-m", "lexical", "-o", str(tmp_path / "out.jsonl")])

    assert result.exit_code == 3, result.output  # its one record failed: lexical measured nothing
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert row["record"]["answer"] is None and row["id"] == "r1"
    assert row["scores"][0]["error"].startswith("invalid record: the mask raised ValueError")
    assert "anna" not in result.output


def test_without_text_keeps_numbers_and_drops_every_string() -> None:
    score = Score(metric="facts", value=0.25, higher_is_better=False, hallucinated=False, threshold=0.5,
                  reason="1 of 2 facts are not in the contexts: 2 500", spans=[Span(start=3, end=8, text="2 500")],
                  details={"language": "en", "similarity": 0.5, "facts": [{"text": "2 500", "score": 0.9}],
                           "flags": [True, "x"]})
    record, [bare] = without_text(Record(**ROW, session_id="chat-7"), [score])
    assert record.answer is None and record.question is None and record.contexts is None
    # the ids that name the trace and its conversation stay
    assert (record.id, record.trace_id, record.session_id) == ("r1", ROW["trace_id"], "chat-7")
    assert bare.reason == "" and bare.spans == [Span(start=3, end=8, text="")]
    assert bare.details == {"similarity": 0.5, "facts": [{"score": 0.9}], "flags": [True]}
    assert (bare.value, bare.hallucinated, bare.threshold) == (0.25, False, 0.5)
