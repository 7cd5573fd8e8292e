"""Span-level bench: character overlap of predicted and gold spans, by hand."""

import numpy as np

from groundtrace.measure.bench import Labelled, span_overlap
from groundtrace.score import Score, Span


def _score(spans):
    return Score(metric="m", value=0.9, higher_is_better=False, spans=[Span(start=s, end=e, text="x" * (e - s)) for s, e in spans])


def test_character_overlap_is_micro_averaged_over_records_with_known_spans():
    items = [
        Labelled({"spans": [{"start": 0, "end": 10}]}, 1, {}),  # gold 0-10, predicted 5-15: tp 5, fp 5, fn 5
        Labelled({"spans": []}, 0, {}),  # faithful, predicted 0-4: fp 4
        Labelled({"spans": []}, 1, {}),  # hallucinated without spans: unknown, skipped
        Labelled({"spans": [{"start": 2, "end": 6}]}, 1, {}),  # not flagged: fn 4
    ]
    scores = [_score([(5, 15)]), _score([(0, 4)]), _score([(0, 50)]), _score([(2, 6)])]
    result = span_overlap(items, scores, np.array([True, True, True, False]))
    precision, recall = 5 / 14, 5 / 14
    assert result == {"precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall), "records": 3}


def test_no_gold_spans_or_no_predicted_spans_gives_none():
    items = [Labelled({"spans": []}, 0, {})]
    assert span_overlap(items, [_score([(0, 3)])], np.array([True])) is None
    items = [Labelled({"spans": [{"start": 0, "end": 2}]}, 1, {})]
    assert span_overlap(items, [_score([])], np.array([True])) is None
