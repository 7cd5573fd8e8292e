"""The one definition of a captured turn (groundtrace.capture.turn), on plain values."""

from __future__ import annotations

import json
import logging

import pytest
from groundtrace.monitor import Monitor
from groundtrace.privacy import apply_mask, text_free_record
from groundtrace.record import Record
from groundtrace.sinks import build_sinks
from groundtrace.sinks.jsonl import JsonlSink
from groundtrace.capture.turn import (
    DOCUMENT,
    TOOL,
    NoRecordReasons,
    Passage,
    ToolFilter,
    Turn,
    appears_in,
    normalize,
    select_contexts,
)

KEPT = "The museum opens at 9 am and closes at 6 pm every day except Monday."
DROPPED = "Adult tickets cost 20 euros when bought online, 25 at the door."
PROMPT = "Answer from the context.\n\nContext:\n  The museum opens at 9 am and closes\n at 6 pm every day except Monday.\n\nQ: when?"


def test_normalize_folds_whitespace():
    assert normalize("  a\n\tb   c \n") == "a b c"


def test_a_passage_reached_the_prompt_verbatim_after_whitespace_folding():
    assert appears_in(KEPT, normalize(PROMPT))
    assert not appears_in(DROPPED, normalize(PROMPT))


def test_a_passage_cut_by_a_template_counts_when_most_of_its_sentences_are_there():
    passage = ("Students pay half price on weekdays. Children under six enter for free. "
               "Groups of ten or more get a guided tour. Audio guides cost three euros.")
    # 3 of 4 sentences of 24+ characters reached the prompt (0.75 >= 0.6); the last one was cut
    prompt = normalize("1. Students pay half price on weekdays.\n2. Children under six enter for free.\n"
                       "3. Groups of ten or more get a guided tour.")
    assert appears_in(passage, prompt)
    # 1 of 4 (0.25) is not enough: a shared sentence is not the passage
    assert not appears_in(passage, normalize("Students pay half price on weekdays."))


def test_empty_and_one_short_sentence_passages_never_count_by_pieces():
    assert not appears_in("   ", "anything")
    assert not appears_in("Yes.", "No.")


def test_select_keeps_what_reached_the_model_in_order_and_each_text_once():
    passages = [Passage(DROPPED, id="d1"), Passage(KEPT, id="d2"), Passage(KEPT, id="d2-again")]
    selection = select_contexts(passages, PROMPT)
    assert [p.id for p in selection.contexts] == ["d2"]
    assert [p.id for p in selection.unused] == ["d1"]
    assert not selection.unchecked


def test_without_a_model_call_every_passage_is_kept_and_marked_unchecked():
    passages = [Passage(DROPPED, id="d1"), Passage(KEPT, id="d2")]
    selection = select_contexts(passages, None)
    assert [p.id for p in selection.contexts] == ["d1", "d2"]
    assert selection.unused == [] and selection.unchecked


def test_a_tool_output_made_of_documents_is_kept_as_those_documents():
    tool_text = f"{KEPT}\n\n{DROPPED}"
    passages = [Passage(KEPT, id="doc-a", within="call-1"), Passage(DROPPED, id="doc-b", within="call-1"),
                Passage(tool_text, kind=TOOL, name="search_docs", id="call-1")]
    selection = select_contexts(passages, f"system\nuser: when?\ntool: {tool_text}")
    assert [p.id for p in selection.contexts] == ["doc-a", "doc-b"]
    # the tool's own text reached the model too; it is represented by its documents, not lost
    assert selection.unused == []


def test_tool_filters_include_and_exclude_by_name():
    passages = [Passage(KEPT, kind=TOOL, name="search", id="1"), Passage(DROPPED, kind=TOOL, name="clock", id="2")]
    prompt = f"{KEPT}\n{DROPPED}"
    assert [p.name for p in select_contexts(passages, prompt, ToolFilter.of(exclude=["clock"])).contexts] == ["search"]
    assert [p.name for p in select_contexts(passages, prompt, ToolFilter.of(include=["clock"])).contexts] == ["clock"]
    assert [p.name for p in select_contexts(passages, prompt).contexts] == ["search", "clock"]
    # a document is never filtered by tool name
    assert ToolFilter.of(include=["x"]).allows("x") and not ToolFilter.of(include=["x"]).allows(None)


def test_the_answer_call_is_the_last_whose_output_is_the_answer():
    turn = Turn(question="When is it open?")
    first = turn.start_call("prompt with tool request")
    first.output = ""  # a tool-calling message has no text
    second = turn.start_call(PROMPT)
    second.output = "It opens at 9 am."
    third = turn.start_call("grade the answer")
    third.output = "yes"
    call = turn.answer_call("It opens at 9 am.", str)
    assert call is second
    # an answer a parser trimmed is still found in its call's output
    assert turn.answer_call("opens at 9 am", str) is second
    # no call wrote this text: the last call with an output
    assert turn.answer_call("something else", str) is third


def test_turn_contexts_read_the_answer_calls_input():
    turn = Turn(question="When is it open?")
    turn.add_passage(Passage(DROPPED, id="d1"))
    turn.add_passage(Passage(KEPT, id="d2"))
    turn.add_passage(Passage("   ", id="blank"))  # nothing to read: never a candidate
    call = turn.start_call(PROMPT)
    call.output = "It opens at 9 am."
    selection = turn.contexts("It opens at 9 am.", str, str)
    assert [p.id for p in selection.contexts] == ["d2"]
    assert [p.summary() for p in selection.unused] == [{"kind": DOCUMENT, "id": "d1"}]


def test_queries_are_derived_kept_once_and_never_the_question():
    turn = Turn(question="and for students?")
    for query in ["student ticket price", "and for students?", "student ticket price", "", "  ", None,
                  "What do students pay at the museum?"]:
        turn.note_query(query)
    assert turn.queries == ["student ticket price", "What do students pay at the museum?"]


def test_model_calls_kept_are_bounded():
    turn = Turn()
    for index in range(200):
        turn.start_call(index)
    assert len(turn.calls) == 64 and turn.calls[-1].input == 199


def test_no_record_reasons_say_each_reason_once_at_info_and_count_all(caplog):
    reasons = NoRecordReasons("LangChain")
    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        for _ in range(3):
            reasons.count("no retrieval and no tool output", "nothing to score")
        reasons.count("no answer")
    lines = [r.getMessage() for r in caplog.records if r.name == "groundtrace.capture"]
    assert lines == [
        "groundtrace: a LangChain turn made no record: no retrieval and no tool output; nothing to score "
        "(said once; counted in stats())",
        "groundtrace: a LangChain turn made no record: no answer (said once; counted in stats())",
    ]
    assert reasons.counts() == {"no retrieval and no tool output": 3, "no answer": 1}


# ------------------------------------------------------------------------------ the Record's queries
def test_record_queries_are_cleaned_checked_masked_and_dropped_without_text():
    record = Record(question="q", queries=["a\x00b", "c"], contexts=["x"], answer="y")
    assert record.queries == ["ab", "c"]
    assert Record(queries="one").queries == ["one"]
    with pytest.raises(ValueError, match="queries must be a list of strings"):
        Record(queries=[1, 2])
    masked = apply_mask(record, lambda text: text.replace("c", "*"))
    assert masked.queries == ["ab", "*"]
    assert text_free_record(record).queries is None


# ------------------------------------------------------------------------------ jsonl:PATH as a sink name
def test_a_jsonl_sink_is_named_with_its_path(tmp_path):
    target = tmp_path / "out" / "scores.jsonl"
    [sink] = build_sinks([f"jsonl:{target}"])
    assert isinstance(sink, JsonlSink) and sink.path == target
    with Monitor(["lexical"], [f"jsonl:{target}"], isolation="thread") as monitor:
        monitor.submit(Record(id="r1", question="q", contexts=[KEPT], answer="It opens at 9 am.",
                              queries=["opening hours"]))
        assert monitor.flush(30)
    [line] = target.read_text(encoding="utf-8").splitlines()
    row = json.loads(line)
    assert row["record"]["id"] == "r1" and row["record"]["queries"] == ["opening hours"]
    assert [s["metric"] for s in row["scores"]] == ["lexical"]


def test_a_built_in_sink_that_takes_no_argument_says_so():
    with pytest.raises(KeyError, match="the otel sink takes no argument"):
        build_sinks(["otel:somewhere"])
    with pytest.raises(KeyError, match="nothing after ':'"):
        build_sinks(["jsonl:  "])


def test_a_failed_tool_call_is_never_a_context_and_is_counted_with_its_tool():
    """Its error text reached the model (the agent read it and answered anyway): still not a context."""
    source = Passage("The museum opens at 9:00 and closes at 18:00 on weekdays.", kind=TOOL, name="hours", id="c1")
    failed = Passage("Ticket office API unavailable (HTTP 503)", kind=TOOL, name="tickets", id="c2", error=True)
    again = Passage("Ticket office API unavailable (HTTP 503)", kind=TOOL, name="tickets", id="c3", error=True)
    prompt = ("Tool hours: The museum opens at 9:00 and closes at 18:00 on weekdays.\n"
              "Tool tickets: Ticket office API unavailable (HTTP 503)")
    selection = select_contexts([source, failed, again], prompt)
    assert [p.text for p in selection.contexts] == [source.text]
    assert selection.set_aside() == [{"kind": "tool", "name": "tickets", "id": "c2", "reason": "tool error"},
                                     {"kind": "tool", "name": "tickets", "id": "c3", "reason": "tool error"}]
    assert selection.tool_errors() == {"count": 2, "tools": ["tickets"]}
    assert select_contexts([source], prompt).tool_errors() is None
