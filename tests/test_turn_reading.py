"""groundtrace.capture.turn: a passage written by a model call of the same turn stands for what that call
read (a sub-agent's reply, a query engine tool's answer), on plain values: model inputs are strings,
replies are strings, and the renderers are ``str``."""

from __future__ import annotations

import logging

from groundtrace.capture.turn import DOCUMENT, MODEL_WRITTEN, TOOL, ModelCall, Passage, ReadCall, Turn, select_contexts
from groundtrace.capture.stats import CaptureCounter, CaptureStats

PRICE = "Adult tickets cost 20 euros when bought online and 25 euros at the door."
HOURS = "The city museum opens at 9 am and closes at 6 pm every day except Monday."
STALE = "Adult tickets cost 45 euros online since the 2019 price change."
RESEARCH = "Research found: an adult ticket is 20 euros online, 25 at the door."
ANSWER = "An adult ticket costs 20 euros online."


def call(turn: Turn, model_input: str, output: str) -> ModelCall:
    made = turn.start_call(model_input)
    made.output = output
    return made


def contexts(turn: Turn, answer: str = ANSWER, **options):
    return turn.contexts(answer, str, str, **options)


def test_a_supervisor_reads_what_its_research_agent_read_not_its_reply():
    """The research agent read PRICE (not STALE, retrieved and dropped); the supervisor read only
    its reply, handed over as a message. The contexts are the document the reply was written from."""
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(PRICE, id="tickets"))
    turn.add_passage(Passage(STALE, id="stale"))
    call(turn, "system: research\nuser: adult ticket price", "")  # the research agent asks for its tool
    call(turn, f"system: research\nuser: adult ticket price\ntool: {PRICE}", RESEARCH)
    call(turn, f"user: How much is an adult ticket online?\nai: {RESEARCH}", ANSWER)

    selection = contexts(turn)

    assert [p.id for p in selection.contexts] == ["tickets"]
    assert [p.id for p in selection.unused] == ["stale"]
    assert selection.written == []  # the reply was a message, never a passage: nothing to set aside


def test_a_query_engine_tools_answer_stands_for_the_nodes_its_synthesis_read():
    """An engine that hallucinates (45 euros is in no node) and an agent that repeats it: the
    engine's answer is no context, so the repeated error is measured against the nodes."""
    engine_answer = "According to the museum, an adult ticket costs 45 euros online."
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(PRICE, id="tickets#0", within="tool-1"))
    turn.add_passage(Passage(HOURS, id="hours#0", within="tool-1"))
    turn.add_passage(Passage(engine_answer, TOOL, name="museum_docs", id="tool-1"))
    call(turn, "user: How much is an adult ticket online?", "")  # the agent calls the tool
    call(turn, f"Context information is below.\n{PRICE}\n{HOURS}\nQuery: adult ticket price\nAnswer: ", engine_answer)
    repeated = "An adult ticket costs 45 euros online."
    call(turn, f"user: How much is an adult ticket online?\ntool: {engine_answer}", repeated)

    selection = contexts(turn, repeated)

    assert [p.id for p in selection.contexts] == ["tickets#0", "hours#0"]
    assert selection.unused == []
    assert [p.id for p in selection.written] == ["tool-1"]
    assert selection.set_aside() == [{"kind": TOOL, "name": "museum_docs", "id": "tool-1", "reason": MODEL_WRITTEN}]


def test_a_tool_whose_inner_model_read_no_passage_keeps_its_output():
    """A tool fetched a price table by code (no retriever, no tool the turn saw) and had a model
    write it up: the write-up is the nearest thing to a source the turn saw, so it stays a context."""
    digest = "Adult tickets are 20 euros online; students pay half price on weekdays."
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(digest, TOOL, name="price_digest", id="call-1"))
    call(turn, "Summarise for a visitor: {'adult': '20 EUR online', 'student': 'half price'}", digest)
    call(turn, f"user: How much is an adult ticket online?\ntool: {digest}", ANSWER)

    selection = contexts(turn)

    assert [p.id for p in selection.contexts] == ["call-1"]
    assert selection.written == [] and selection.unused == []


def test_the_rule_recurses_through_two_levels_of_model_written_replies():
    """A supervisor asks a manager agent (a tool), which asks a research agent (a tool inside it),
    which read the document: both replies stand for the document."""
    manager_reply = "My researcher says an adult ticket is 20 euros online, 25 at the door."
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(PRICE, id="tickets"))
    turn.add_passage(Passage(RESEARCH, TOOL, name="ask_research", id="call-inner"))
    turn.add_passage(Passage(manager_reply, TOOL, name="ask_manager", id="call-outer"))
    call(turn, f"user: adult ticket price\ntool: {PRICE}", RESEARCH)
    call(turn, f"user: adult ticket?\ntool: {RESEARCH}", manager_reply)
    call(turn, f"user: How much is an adult ticket online?\ntool: {manager_reply}", ANSWER)

    selection = contexts(turn)

    assert [p.id for p in selection.contexts] == ["tickets"]
    assert [p.id for p in selection.written] == ["call-inner", "call-outer"]
    answer_call = turn.answer_call(ANSWER, str)
    assert answer_call is not None
    assert turn.reading(answer_call, str, str).calls == [turn.calls[2], turn.calls[1], turn.calls[0]]


def test_a_short_reply_never_counts():
    """A grader's "yes" is in the answer call's input, and so in every prompt: it brings nothing of
    what the grader read (the rejected document)."""
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(STALE, id="stale"))
    turn.add_passage(Passage(PRICE, id="tickets"))
    call(turn, f"Is this relevant? {STALE}", "yes")
    call(turn, f"Answer from: {PRICE}\nA grader said: yes\nQ: How much is an adult ticket online?", ANSWER)

    answer_call = turn.answer_call(ANSWER, str)
    assert answer_call is not None
    assert turn.reading(answer_call, str, str).calls == [turn.calls[1]]
    assert [p.id for p in contexts(turn).contexts] == ["tickets"]


def test_replies_in_says_where_a_reply_may_have_been_handed_over():
    """A query rewritten into the user's part of a prompt does not bring what its rewriter read,
    when the integration lists only the AI and tool parts of an input."""
    rewritten = "adult ticket price when bought online"
    turn = Turn(question="How much for the entry?")
    turn.add_passage(Passage(STALE, id="stale"))
    turn.add_passage(Passage(PRICE, id="tickets"))
    call(turn, f"Rewrite the question; a passage was rejected: {STALE}", rewritten)
    call(turn, f"user: {rewritten}\ntool: {PRICE}", ANSWER)

    def ai_and_tool_parts(model_input: str) -> list[str]:
        return [line for line in model_input.splitlines() if not line.startswith("user: ")]

    assert [p.id for p in contexts(turn).contexts] == ["stale", "tickets"]  # the default: the whole input
    assert [p.id for p in contexts(turn, replies_in=ai_and_tool_parts).contexts] == ["tickets"]


def test_nested_tool_calls_are_represented_by_what_reached_from_inside_them():
    inner_text = f"{PRICE}\n\n{HOURS}"
    passages = [Passage(PRICE, id="tickets", within="inner"), Passage(HOURS, id="hours", within="inner"),
                Passage(inner_text, TOOL, name="search", id="inner", within="outer"),
                Passage(f"Found: {inner_text}", TOOL, name="ask", id="outer")]

    selection = select_contexts(passages, f"tool: Found: {inner_text}")

    assert [p.id for p in selection.contexts] == ["tickets", "hours"]
    assert selection.unused == [] and selection.written == []


def test_a_model_written_passage_is_set_aside_only_for_a_call_that_read_another_passage():
    reply = "An adult ticket costs 20 euros online and 25 at the door."
    written = Passage(reply, TOOL, name="ask", id="t")
    document = Passage(PRICE, DOCUMENT, id="d")
    read_document = [ReadCall(input=f"context: {PRICE}", reply=reply)]
    read_nothing = [ReadCall(input="context: none", reply=reply)]

    assert [p.id for p in select_contexts([document, written], f"tool: {reply}", read=read_document).contexts] == ["d"]
    assert [p.id for p in select_contexts([document, written], f"tool: {reply}", read=read_nothing).contexts] == ["t"]


def test_a_document_is_never_model_written_even_when_a_reply_quotes_it_word_for_word():
    """A refine step's first answer quotes the second document exactly; the second step reads that
    answer and the second document. The document was retrieved, not written: it stays a context."""
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(HOURS, id="hours"))
    turn.add_passage(Passage(PRICE, id="tickets"))
    call(turn, f"Context: {HOURS}\nQ: price?", PRICE)
    call(turn, f"Existing answer: {PRICE}\nMore context: {PRICE}\nRefine.", ANSWER)

    selection = contexts(turn)

    assert [p.id for p in selection.contexts] == ["hours", "tickets"] and selection.written == []


def test_a_call_that_quotes_a_tool_output_it_read_did_not_write_it():
    tool_text = "Adult ticket: 20 EUR online, 25 EUR at the door (price table, 2026)."
    turn = Turn(question="How much is an adult ticket online?")
    turn.add_passage(Passage(HOURS, id="hours"))
    turn.add_passage(Passage(tool_text, TOOL, name="lookup_prices", id="call-1"))
    call(turn, f"Context: {HOURS}\ntool: {tool_text}\nQuote the price line.", tool_text)
    call(turn, f"ai: {tool_text}\ntool: {tool_text}", ANSWER)

    selection = contexts(turn)

    # the quoting call is read (its reply is in the answer's input), so what it read counts; but
    # the tool's output it quoted is still the tool's, not the model's
    assert [p.id for p in selection.contexts] == ["hours", "call-1"] and selection.written == []


# ------------------------------------------------------------------------------ CaptureStats
def test_capture_stats_account_for_every_root_and_say_failures_once(caplog):
    counter = CaptureCounter("LangChain")
    with caplog.at_level(logging.INFO, logger="groundtrace.capture"):
        for _ in range(7):
            counter.root()
        counter.recorded(excluded=False)
        counter.recorded(excluded=True)
        counter.no_record("no answer")
        counter.failed("its answer is not scored")
        counter.failed("its answer is not scored")
        counter.evicted(1, "close your streams")
        counter.callback_error()

    stats = counter.snapshot(in_flight=1)
    assert stats == CaptureStats(roots=7, recorded=2, excluded=1, no_record={"no answer": 1}, failed=2, evicted=1,
                                 callback_errors=1, in_flight=1)
    assert stats.accounted() == stats.roots == 2 + 1 + 2 + 1 + 1
    lines = [r.getMessage() for r in caplog.records if r.name == "groundtrace.capture"]
    assert lines == [
        "groundtrace: a LangChain turn made no record: no answer (said once; counted in stats())",
        "groundtrace: a LangChain turn made no record: the root raised; its answer is not scored "
        "(said once; counted in stats())",
        "groundtrace: a LangChain turn made no record: the root never ended; close your streams "
        "(said once; counted in stats())",
    ]
    assert stats.as_dict()["no_record"] == {"no answer": 1}
