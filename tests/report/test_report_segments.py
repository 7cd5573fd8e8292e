import sys

from groundtrace.report.passages import context_marks
from groundtrace.report.segments import Mark, segment
from groundtrace.score import Score


def pieces(text, marks):
    return [(s.text, s.sources) for s in segment(text, marks)]


def test_overlapping_marks_of_two_metrics_become_disjoint_segments():
    text = "0123456789"
    marks = [Mark(2, 6, "a", "x"), Mark(4, 8, "b", "y")]
    assert pieces(text, marks) == [("01", []), ("23", ["a"]), ("45", ["a", "b"]), ("67", ["b"]), ("89", [])]


def test_nested_equal_and_adjacent_marks():
    text = "abcdefgh"
    marks = [Mark(0, 8, "a", "x"), Mark(2, 4, "b", "y"), Mark(2, 4, "c", "z"), Mark(4, 6, "b", "y")]
    assert pieces(text, marks) == [("ab", ["a"]), ("cd", ["a", "b", "c"]), ("ef", ["a", "b"]), ("gh", ["a"])]


def test_marks_of_the_same_metric_that_touch_stay_one_segment_each_with_their_own_marks():
    segments = segment("abcd", [Mark(0, 2, "a", "x", reason="first"), Mark(2, 4, "a", "x", reason="second")])
    assert [(s.text, [m.reason for m in s.marks]) for s in segments] == [("ab", ["first"]), ("cd", ["second"])]


def test_offsets_outside_the_text_are_clipped_and_empty_marks_dropped():
    assert pieces("abc", [Mark(1, 99, "a", "x"), Mark(5, 9, "b", "y"), Mark(2, 2, "c", "z")]) == [("a", []), ("bc", ["a"])]
    assert pieces("", [Mark(0, 3, "a", "x")]) == []
    assert pieces("abc", []) == [("abc", [])]


def marked(words: int) -> tuple[str, list[Mark]]:
    text = "word " * words
    marks = [Mark(i, i + 4, "lexical", "unexpected word") for i in range(0, len(text), 50)]
    marks += [Mark(i, i + 120, "grounding", "unsupported") for i in range(0, len(text), 400)]
    return text, marks


def lines_run(function, *args) -> int:
    """Python lines executed by ``function(*args)`` and what it calls: a count of operations that does not
    depend on the machine's speed or load."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        function(*args)
    finally:
        sys.settrace(None)
    return count


def test_segmenting_costs_linear_work_in_the_answer_and_its_marks():
    small, large = lines_run(segment, *marked(20_000)), lines_run(segment, *marked(40_000))
    assert 1.9 < large / small < 2.1, (small, large)  # twice the text and marks, twice the work (quadratic: 4x)


def test_a_huge_answer_with_many_marks_is_segmented_whole():
    text, marks = marked(400_000)  # 2 million characters
    segments = segment(text, marks)
    assert "".join(s.text for s in segments) == text
    assert sum(1 for s in segments if "lexical" in s.sources) == len(range(0, len(text), 50))


def test_context_marks_come_only_from_details_that_name_passages():
    contexts = ["Refunds take 5 days. Shipping is free.", "The fee is 100 rubles."]
    scores = [
        Score(metric="context_relevance", value=0.5, higher_is_better=True,
              details={"relevant_sentences": ["Shipping is free.", "Not in any context."]}),
        Score(metric="hallucination", value=0.5, higher_is_better=False, details={"contexts": [
            {"statement": "The fee is 100 rubles.", "contradicted": 1.0, "reason": "the answer says 200"},
            {"statement": "Refunds take 5 days.", "contradicted": 0.0, "reason": ""},
        ]}),
        Score(metric="grounding", value=0.1, higher_is_better=False, details={"supporting_contexts": [0, 7], "claims": []}),
        Score(metric="lexical", value=0.9, higher_is_better=True, details={"U": []}),
    ]
    marks = context_marks(contexts, scores)
    assert [(m.source, m.label, contexts[0][m.start:m.end]) for m in marks[0]] == [
        ("context_relevance", "relevant", "Shipping is free."),
        ("grounding", "supporting", contexts[0]),
    ]
    assert [(m.source, m.label, m.score, m.reason, contexts[1][m.start:m.end]) for m in marks[1]] == [
        ("hallucination", "contradicted", 1.0, "the answer says 200", "The fee is 100 rubles."),
    ]
