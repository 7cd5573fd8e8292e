"""score, bench and report read RAGAS (>= 0.2 and older) and DeepEval data as it is, from JSONL, CSV and
Parquet: each layout's fields land in the same Record, and the same lexical values come out (worked out by
hand in tests/hand_checked.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.io import map_rows, read_layout
from groundtrace.io.layouts import LAYOUT_NAMES, LayoutError, detect, resolve
from tests.hand_checked import CONTEXT, COPY, OTHER, ZEBRAS

pq = pytest.importorskip("pyarrow.parquet", reason="the parquet extra is not installed: pip install 'groundtrace[parquet]'")
import pyarrow as pa  # noqa: E402

runner = CliRunner()

GROUNDED = {"question": "When does the library open?", "contexts": [CONTEXT, OTHER], "answer": COPY, "reference": "At nine."}
UNGROUNDED = {"question": "What lives on the savanna?", "contexts": [CONTEXT], "answer": ZEBRAS, "reference": "Zebras."}
RECORDS = [GROUNDED, UNGROUNDED]
# by hand (tests/hand_checked.py): a copy of one of two contexts 0.7, ZEBRAS 0.0
LEXICAL = [(pytest.approx(0.7), False), (0.0, True)]


def in_layout(layout: str, record: dict[str, Any], label: int) -> dict[str, Any]:
    """A record as each tool writes it (the label and id pass through under their own names)."""
    q, c, a, r = record["question"], record["contexts"], record["answer"], record["reference"]
    rows = {
        "groundtrace": {"question": q, "contexts": c, "answer": a, "reference": r},
        "ragas": {"user_input": q, "retrieved_contexts": c, "response": a, "reference": r},
        "ragas-legacy": {"question": q, "contexts": c, "answer": a, "ground_truths": [r, "another reading"]},
        "deepeval": {"input": q, "actual_output": a, "retrieval_context": c, "expected_output": r},
    }
    return {"id": f"r{label}", **rows[layout], "label": label}


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".csv":  # lists as JSON text in their cell, as pandas' to_csv would not, but people do
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()} for row in rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def labelled(layout: str) -> list[dict[str, Any]]:
    return [in_layout(layout, record, label) for label, record in enumerate(RECORDS)]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_every_layout_in_every_format_is_read_into_the_same_records_and_scores(tmp_path, layout, suffix) -> None:
    source = write(tmp_path / f"{layout}{suffix}", labelled(layout))
    read = read_layout(source)
    assert read.layout is not None and read.layout.name == layout
    rows = list(read.rows)
    assert [{k: row[k] for k in ("question", "contexts", "answer", "reference")} for row in rows] == RECORDS
    assert [(row["id"], row["label"]) for row in rows] == [("r0", 0), ("r1", 1)]  # CSV's "1" is a label again

    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 0, result.output
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["record"]["answer"], row["record"]["reference"]) for row in scored] == \
        [(r["answer"], r["reference"]) for r in RECORDS]
    assert [(row["scores"][0]["value"], row["scores"][0]["hallucinated"]) for row in scored] == LEXICAL


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_file_in_no_layout_is_refused_before_scoring_naming_its_keys_and_the_layouts(tmp_path, suffix) -> None:
    source = write(tmp_path / f"none{suffix}", [{"text": "x", "output": "y"}])
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert f"the records of {source} fit no known layout: keys found: output, text;" in message
    for layout in LAYOUT_NAMES:
        assert f"{layout} (" in message
    assert "--schema NAME" in message
    assert not out.exists()  # never a file of empty scores


def test_a_file_that_fits_two_layouts_is_refused_naming_both_and_schema_settles_it(tmp_path) -> None:
    row = {**in_layout("ragas", GROUNDED, 0), "answer": "Something else entirely."}
    source = write(tmp_path / "both.jsonl", [row])
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert ("fit more than one layout: keys found: answer, id, label, reference, response, retrieved_contexts, "
            "user_input;") in message
    assert ("they fit groundtrace (reads answer, reference) and ragas (reads reference, response, retrieved_contexts, "
            "user_input)") in message
    assert not out.exists()

    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out), "--schema", "ragas"])
    assert result.exit_code == 0, result.output
    [scored] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert scored["record"]["answer"] == CONTEXT and scored["scores"][0]["value"] == LEXICAL[0][0]


def test_detection_prefers_the_layout_that_reads_more_and_treats_alike_readings_as_one() -> None:
    assert detect({"question", "contexts", "answer"}).name == "groundtrace"  # RAGAS 0.1 reads it alike
    assert detect({"question", "contexts", "answer", "ground_truth"}).name == "ragas-legacy"
    assert detect({"question", "contexts", "answer", "reference"}).name == "groundtrace"
    assert detect({"input", "actual_output", "context"}).name == "deepeval"
    with pytest.raises(LayoutError, match=r"groundtrace \(reads answer, contexts, question, reference\) and "
                                          r"ragas-legacy \(reads answer, contexts, ground_truth, question\)"):
        detect({"question", "contexts", "answer", "reference", "ground_truth"})  # which one is the reference?


def test_a_forced_schema_must_fit_and_must_exist() -> None:
    with pytest.raises(LayoutError, match=r"schema deepeval: the records have no 'actual_output' \(the answer\); "
                                          r"keys found: answer"):
        resolve({"answer"}, "deepeval")
    with pytest.raises(LayoutError, match="unknown layout 'ragas2'; choose one of auto, groundtrace, ragas, "
                                          "ragas-legacy, deepeval"):
        resolve({"answer"}, "ragas2")


def test_keys_that_arrive_after_the_first_rows_are_read_by_the_chosen_layout_and_bad_lines_pass_through() -> None:
    rows = [{"question": "q", "contexts": ["c"], "answer": "a"}, {"question": "q", "contexts": ["c"], "answer": "a",
                                                                  "ground_truths": ["g"]}]
    read = map_rows(rows)
    assert read.layout is not None and read.layout.name == "ragas-legacy"  # the union of the keys decides
    assert [row.get("reference") for row in read.rows] == [None, "g"]
    assert map_rows([]).layout is None


def test_a_csv_row_with_more_cells_than_columns_is_an_error_score_not_a_lost_row(tmp_path) -> None:
    source = tmp_path / "ragged.csv"
    source.write_text(f'response,retrieved_contexts\n"{CONTEXT}","[""{CONTEXT}""]"\nx,y,z\n', encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 0, result.output
    first, second = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert first["scores"][0]["value"] == 1.0
    assert second["id"] == "line-3" and second["scores"][0]["error"] == \
        "invalid record: line 3 has more cells than the header has columns"


@pytest.mark.parametrize("layout", ["ragas", "deepeval"])
def test_bench_reads_labels_in_any_layout_and_format(tmp_path, layout) -> None:
    source = write(tmp_path / f"{layout}.csv", labelled(layout))
    result = runner.invoke(app, ["bench", str(source), "-m", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["lexical"]
    assert (report["n"], report["positives"], report["auc"], report["f1"]) == (2, 1, 1.0, 1.0)


def test_bench_refuses_a_file_in_two_layouts_with_the_same_message(tmp_path) -> None:
    source = write(tmp_path / "both.jsonl", [{**in_layout("deepeval", GROUNDED, 0), "response": "x"}])
    result = runner.invoke(app, ["bench", str(source), "-m", "lexical"])
    assert result.exit_code == 2
    assert ("they fit ragas (reads response) and deepeval (reads actual_output, expected_output, input, retrieval_context)"
            in " ".join(result.output.split()))
    result = runner.invoke(app, ["bench", str(source), "-m", "lexical", "--schema", "deepeval", "--json"])
    assert result.exit_code == 0, result.output


def test_report_joins_labels_in_a_ragas_csv_by_id(tmp_path) -> None:
    source = write(tmp_path / "ragas.csv", labelled("ragas"))
    scores = tmp_path / "scores.jsonl"
    assert runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(scores)]).exit_code == 0
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html"), "--labels", str(source),
                                 "--schema", "ragas"])
    assert result.exit_code == 0, result.output
    assert "2 records, 2 with gold labels" in result.output
    both = write(tmp_path / "both.jsonl", [{"id": "r0", "answer": "x", "response": "y", "label": 0}])
    result = runner.invoke(app, ["report", str(scores), "--labels", str(both)])
    assert result.exit_code == 2 and "fit more than one layout" in result.output


def test_report_labels_may_be_labels_alone_joined_by_id(tmp_path) -> None:
    source = write(tmp_path / "ragas.jsonl", labelled("ragas"))
    scores = tmp_path / "scores.jsonl"
    assert runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(scores)]).exit_code == 0
    labels = write(tmp_path / "labels.csv", [{"id": "r0", "label": 0}, {"id": "r1", "label": 1}])
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html"), "--labels", str(labels)])
    assert result.exit_code == 0, result.output
    assert "2 records, 2 with gold labels" in result.output
    with pytest.raises(LayoutError, match="fit no known layout"):  # to be scored or benched, a file needs answers
        read_layout(labels)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize(("sessions", "kept"), [
    (["chat-1", None], ["chat-1", None]),  # CSV's empty cell is no session, not an empty one
    ([41, 42], ["41", "42"]),  # numbered conversations are ids too
])
def test_a_session_id_column_is_read_into_the_record_and_written_back(tmp_path, suffix, sessions, kept) -> None:
    rows = [{**row, "session_id": session} for row, session in zip(labelled("ragas"), sessions, strict=True)]
    source = write(tmp_path / f"in{suffix}", rows)
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["score", str(source), "-m", "lexical", "-o", str(out)])
    assert result.exit_code == 0, result.output
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["id"], row["record"]["session_id"]) for row in scored] == list(zip(["r0", "r1"], kept, strict=True))
