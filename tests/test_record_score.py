import json
import math

import pytest
from pydantic import ValidationError

from groundtrace import Record, Score, ScoredRecord, Span
from groundtrace.record import InvalidRecord, coerce_record


def test_record_json_round_trip_keeps_every_field():
    record = Record(id="q-1", question="Где?", contexts=["В Москве."], answer="В Москве.", reference="Москва",
                    language="ru", metadata={"k": [1, 2]}, trace_id="ab" * 16, span_id="cd" * 8, run_id="r1")
    again = Record.model_validate_json(record.model_dump_json())
    assert again == record


def test_score_json_round_trip_and_orientation():
    score = Score(metric="lexical", value=0.25, higher_is_better=True, hallucinated=True, threshold=0.3,
                  reason="r", spans=[Span(start=0, end=3, text="abc", score=0.9)], details={"B": 0.1})
    again = Score.model_validate_json(score.model_dump_json())
    assert again == score
    assert again.hallucination_score == pytest.approx(0.75)
    assert Score(metric="facts", value=0.25, higher_is_better=False).hallucination_score == 0.25


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.1, 1.5])
def test_score_rejects_nan_and_out_of_range(value):
    with pytest.raises(ValidationError):
        Score(metric="m", value=value, higher_is_better=True)


def test_span_end_before_start_is_rejected():
    with pytest.raises(ValidationError):
        Span(start=5, end=2, text="x")


def test_integer_id_and_document_contexts_are_accepted():
    record = coerce_record({"id": 7, "contexts": [{"page_content": "a"}, {"text": "b"}, None, "c"], "answer": "x"})
    assert record.id == "7"
    assert record.contexts == ["a", "b", "c"]


def test_one_context_given_as_string_becomes_a_list():
    assert coerce_record({"contexts": "only one", "answer": "x"}).contexts == ["only one"]


def test_wrong_types_name_the_field():
    with pytest.raises(InvalidRecord, match="field 'answer'.*got int"):
        coerce_record({"answer": 123, "contexts": []})
    with pytest.raises(InvalidRecord, match="field 'contexts'"):
        coerce_record({"answer": "x", "contexts": 5})
    with pytest.raises(InvalidRecord, match="mapping"):
        coerce_record(["not", "a", "record"])


def test_control_characters_and_lone_surrogates_are_cleaned():
    record = Record(answer="ok\x00\x07 text\ud800 end\n", contexts=["a\x1bb"])
    assert record.answer == "ok text\ufffd end\n"
    assert record.contexts == ["ab"]
    json.loads(record.model_dump_json())  # encodable


def test_language_code_is_normalised():
    assert Record(answer="x", language="RU-ru").language == "ru"


def test_scored_record_carries_the_record_id():
    row = ScoredRecord(record=Record(id="abc", answer="x"), scores=[])
    assert row.id == "abc"
    assert json.loads(row.model_dump_json())["id"] == "abc"
