"""How a Score reads in a trace viewer: verdict first, rounded numbers, the direction, the phrases in words."""

from __future__ import annotations

from groundtrace.score import Score, Span
from groundtrace.sinks.readable import PHRASE_CHARS, headline, higher_reads_better, passed, phrases, rationale


def grounding(value: float, hallucinated: bool | None = None, threshold: float | None = None, **more) -> Score:
    return Score(metric="grounding", value=value, higher_is_better=False, hallucinated=hallucinated,
                 threshold=threshold, **more)


def test_a_hallucinated_grounding_reads_as_a_fail_and_its_number_turns_around():
    score = grounding(0.953, True, 0.51489)
    assert passed(score) is False
    assert higher_reads_better(score) == 0.047  # 1 - 0.953
    assert headline(score) == "hallucinated: grounding 0.95 (threshold 0.51; higher means less supported)"


def test_a_higher_is_better_metric_keeps_its_number():
    score = Score(metric="faithfulness", value=0.8, higher_is_better=True, hallucinated=False, threshold=0.7)
    assert (passed(score), higher_reads_better(score)) == (True, 0.8)
    assert headline(score) == "grounded: faithfulness 0.80 (threshold 0.70; higher is better)"


def test_no_verdict_no_label_and_an_error_says_so():
    assert passed(grounding(0.2)) is None
    assert headline(grounding(0.2)) == "grounding 0.20 (higher means less supported)"
    failed = Score(metric="judge", value=None, higher_is_better=True, error="timed out after 30 s")
    assert (passed(failed), higher_reads_better(failed)) == (None, None)
    assert rationale(failed) == "error: timed out after 30 s"


def test_the_phrases_are_quoted_cut_and_counted():
    long = "x " * 100  # 200 characters, 199 once its spaces are folded
    spans = [Span(start=0, end=5, text="Refunds\n are paid"), Span(start=6, end=206, text=long)]
    spans += [Span(start=300 + i, end=301 + i, text=str(i)) for i in range(5)]
    score = grounding(0.9, True, 0.5, spans=spans, reason="2 of 3 sentences unsupported")
    quoted = phrases(score)
    cut = ("x " * 100).strip()[:PHRASE_CHARS - 1]
    assert quoted == f'Unsupported: "Refunds are paid"; "{cut}…"; "0"; "1"; "2" (and 2 more)'
    assert rationale(score).split("\n") == [
        "hallucinated: grounding 0.90 (threshold 0.50; higher means less supported)", quoted,
        "2 of 3 sentences unsupported"]
    assert phrases(grounding(0.1, False, 0.5)) is None


def test_with_capture_text_off_no_phrase_is_quoted():
    from groundtrace.privacy import text_free_score

    score = text_free_score(grounding(0.9, True, 0.5, spans=[Span(start=0, end=5, text="Lyon!")], reason="Lyon!"))
    assert rationale(score) == "hallucinated: grounding 0.90 (threshold 0.50; higher means less supported)"
