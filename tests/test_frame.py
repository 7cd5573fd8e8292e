"""groundtrace.score_frame: a DataFrame in any layout, back with <metric>, <metric>_flagged, <metric>_reason
and <metric>_spans per metric (lexical values by hand: tests/hand_checked.py)."""

from __future__ import annotations

import json
import re
import sys

import pytest

import groundtrace
from groundtrace.errors import install_hint
from groundtrace._extras import MissingExtraError
from groundtrace.io.layouts import LayoutError
from tests.hand_checked import CONTEXT, COPY, ZEBRAS, ZEBRAS_REASON, ZEBRAS_SPANS

pd = pytest.importorskip("pandas", reason="the pandas extra is not installed: pip install 'groundtrace[pandas]'")

RAGAS = [
    {"user_input": "When does the library open?", "retrieved_contexts": [CONTEXT], "response": COPY},
    {"user_input": "What lives on the savanna?", "retrieved_contexts": [CONTEXT], "response": ZEBRAS},
    {"user_input": "And then?", "retrieved_contexts": [CONTEXT], "response": None},
]
MISSING = "the record has no 'answer' (the generated answer), which metric 'lexical' needs"


def test_a_ragas_frame_gets_four_columns_per_metric_and_keeps_its_own() -> None:
    df = pd.DataFrame(RAGAS, index=["a", "b", "c"])
    before = df.copy()

    out = groundtrace.score_frame(df, ["lexical"])

    pd.testing.assert_frame_equal(df, before)  # the caller's frame is not changed
    assert list(out.columns) == [*df.columns, "lexical", "lexical_flagged", "lexical_reason", "lexical_spans"]
    assert list(out.index) == ["a", "b", "c"]
    assert (str(out["lexical"].dtype), str(out["lexical_flagged"].dtype)) == ("Float64", "boolean")
    assert out["lexical"].tolist()[:2] == [1.0, 0.0]
    assert out["lexical_flagged"].tolist()[:2] == [False, True]
    assert out.loc["b", "lexical_reason"] == ZEBRAS_REASON
    assert out.loc["b", "lexical_spans"] == ZEBRAS_SPANS and out.loc["a", "lexical_spans"] == []
    # a row that cannot be scored: <NA> (never NaN) and the reason says why
    assert out.loc["c", "lexical"] is pd.NA and out.loc["c", "lexical_flagged"] is pd.NA
    assert out.loc["c", "lexical_reason"] == MISSING


def test_a_session_id_column_stays_beside_the_scores_and_evaluate_keeps_it_on_the_record() -> None:
    df = pd.DataFrame([{**row, "session_id": session} for row, session in zip(RAGAS[:2], ["chat-1", "chat-2"], strict=True)])
    out = groundtrace.score_frame(df, ["lexical"])
    assert out[["session_id", "lexical"]].values.tolist() == [["chat-1", 1.0], ["chat-2", 0.0]]

    scored = groundtrace.evaluate([{"question": "q", "contexts": [CONTEXT], "answer": COPY, "session_id": 7}], ["lexical"])
    assert [(row.record.session_id, row.scores[0].value) for row in scored] == [("7", 1.0)]


def test_metric_options_go_by_metric_name() -> None:
    out = groundtrace.score_frame(pd.DataFrame(RAGAS[:1]), ["lexical"], lexical={"threshold": 1.0})
    assert out["lexical_flagged"].tolist() == [False]  # 1.0 is not below 1.0
    out = groundtrace.score_frame(pd.DataFrame(RAGAS[1:2]), ["lexical"], lexical={"threshold": 0.0})
    assert out["lexical_flagged"].tolist() == [False]  # nor is 0.0 below 0.0
    with pytest.raises(ValueError, match="options given for metrics that are not selected: facts"):
        groundtrace.score_frame(pd.DataFrame(RAGAS), ["lexical"], facts={"mode": "seed"})


def test_frames_read_from_parquet_and_csv_are_scored_alike(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(RAGAS[:2])
    frame.to_parquet(tmp_path / "r.parquet")
    frame.assign(retrieved_contexts=frame["retrieved_contexts"].map(json.dumps)).to_csv(tmp_path / "r.csv", index=False)
    from_parquet = pd.read_parquet(tmp_path / "r.parquet")  # contexts come back as numpy arrays
    from_csv = pd.read_csv(tmp_path / "r.csv")  # contexts come back as JSON text
    for df in (from_parquet, from_csv):
        out = groundtrace.score_frame(df, ["lexical"])
        assert out["lexical"].tolist() == [1.0, 0.0] and out["lexical_reason"][1] == ZEBRAS_REASON


def test_a_frame_in_no_layout_is_refused_before_scoring_naming_its_columns() -> None:
    with pytest.raises(LayoutError, match="the DataFrame's rows fit no known layout: keys found: output, prompt;"):
        groundtrace.score_frame(pd.DataFrame([{"prompt": "q", "output": "a"}]), ["lexical"])
    out = groundtrace.score_frame(pd.DataFrame([{"prompt": "q", "output": "a", "answer": "a"}]), ["lexical"])
    assert out["lexical_reason"].tolist() == ["the record has no 'contexts' (the retrieved passages), which metric "
                                              "'lexical' needs"]


def test_without_pandas_the_error_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=r"groundtrace.score_frame needs .* " + re.escape(install_hint("pandas"))):
        groundtrace.score_frame(object(), ["lexical"])
