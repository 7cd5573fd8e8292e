"""Grounding's spans hold the wrong fact: a number, date, time or name of a flagged claim that the contexts do not
state lies inside a highlighted span (metrics/fact_spans.py), in the Score, the report and the review page."""

from __future__ import annotations

import pytest

from groundtrace.metrics import get_metric
from groundtrace.metrics.fact_spans import ClaimRange, absent_facts, with_facts
from groundtrace.score import Span
from groundtrace.text.facts import extract_facts

CONTEXT = ("The museum opens at 9 am and closes at 6 pm; entry costs 12 euros. "
           "It was founded by Anna Petrova in 1921 in Lyon.")


def span(answer: str, text: str, score: float = 0.9) -> Span:
    start = answer.index(text)
    return Span(start=start, end=start + len(text), text=text, score=score)


def test_a_span_beside_the_wrong_number_grows_to_hold_it():
    answer = "Entry costs 5 euros for students."
    facts = [(f, 0.93) for f in extract_facts(answer, "en")]
    [grown] = with_facts(answer, [span(answer, "for students")], facts)
    assert (grown.text, grown.label, grown.score) == ("5 euros for students", "unsupported", 0.9)


def test_a_wrong_fact_apart_from_every_span_is_a_span_of_its_own_scored_by_its_claim():
    answer = "It was built by Maria Lopez, as the guides all say today."
    facts = [(f, 0.87) for f in extract_facts(answer, "en")]
    spans = with_facts(answer, [span(answer, "all say today")], facts)
    assert [(s.text, s.label, s.score) for s in spans] == [("Maria Lopez", "unsupported name", 0.87),
                                                            ("all say today", "unsupported", 0.9)]


def test_a_fact_already_inside_a_span_changes_nothing_and_grown_spans_that_meet_become_one():
    answer = "It closes at 8 pm, 2 hours later."
    inside = with_facts(answer, [span(answer, "closes at 8 pm")], [(f, 0.9) for f in extract_facts(answer, "en")
                                                                   if f.text.startswith("8")])
    assert [s.text for s in inside] == ["closes at 8 pm"]
    two = [span(answer, "It closes at", 0.6), span(answer, "hours later", 0.8)]
    met = with_facts(answer, two, [(f, 0.9) for f in extract_facts(answer, "en")])
    assert [(s.text, s.score) for s in met] == [("It closes at 8 pm, 2 hours later", 0.8)]


def test_only_facts_of_unsupported_claims_that_the_contexts_do_not_state_are_absent():
    answer = "It opens at 9 am. Entry costs 5 euros and Maria Lopez founded it in 1921."
    cut = answer.index("Entry")
    claims = [ClaimRange(0, cut, 0.9), ClaimRange(cut, len(answer), 0.8)]
    assert [(f.text, f.kind) for f, _ in absent_facts(answer, [CONTEXT], "en", claims, 0.5)] == [
        ("5 euros", "number"), ("Maria Lopez", "name")]  # 9 am and 1921 are stated
    assert absent_facts(answer, [CONTEXT], "en", [ClaimRange(0, len(answer), 0.3)], 0.5) == []  # nothing flagged


@pytest.mark.parametrize("answer, wrong", [
    ("The museum was founded in 1921 by Anna Petrova; it closes at 8 pm.", "8 pm"),
    ("Entry costs 5 euros for students from Spain.", "5 euros"),
    ("It was founded by Maria Lopez in 1925.", "1925"),
])
def test_grounding_puts_the_wrong_fact_inside_a_span_and_names_it_without_moving_its_value(answer, wrong):
    record = {"question": "Tell me about the museum.", "contexts": [CONTEXT], "answer": answer}
    score, plain = get_metric("grounding_xe").score(record), get_metric("grounding_xe", fact_spans="false").score(record)
    assert score.hallucinated and score.value == plain.value
    start = answer.index(wrong)
    assert any(s.start <= start and start + len(wrong) <= s.end for s in score.spans)
    assert "not in the contexts: " in score.reason and f"{wrong} (" in score.reason.split("not in the contexts: ")[1]
    assert any(f["text"].rstrip(".") == wrong and f["start"] == start for f in score.details["absent_facts"])
    assert plain.details["absent_facts"] == []


def test_a_supported_answer_gets_no_fact_spans():
    record = {"question": "When does it open?", "contexts": [CONTEXT], "answer": "It opens at 9 am and entry costs 12 euros."}
    score = get_metric("grounding_xe").score(record)
    assert not score.hallucinated and score.spans == [] and score.details["absent_facts"] == []
    five = get_metric("grounding").score(record)
    assert not five.hallucinated and five.spans == []


def test_the_report_marks_the_wrong_number_as_grounding_highlighted_it():
    from groundtrace.record import Record
    from groundtrace.report import render_report
    from groundtrace.score import ScoredRecord
    from tests.report.dom import marked_chars, parse

    answer = "The museum was founded in 1921 by Anna Petrova; it closes at 8 pm."
    record = Record(id="r1", question="Tell me about the museum.", contexts=[CONTEXT], answer=answer)
    score = get_metric("grounding").score(record)
    doc = parse(render_report([ScoredRecord(record=record, scores=[score])]))
    marked = marked_chars(doc.find("details", id="r0").find("p", cls="answer"))["grounding"]
    start = answer.index("8 pm")
    assert set(range(start, start + len("8 pm"))) <= marked
