"""Fuzzed: the record reader, in every layout it reads (JSON Lines, Parquet rows), into the batch.
One output row per input line or row, in order, never an exception; a line or row that is no record
gets an error Score with a reason; the progress count agrees with what is read."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundtrace.batch.stream import score_stream
from groundtrace.io import count_records, read_records
from groundtrace.score import ScoredRecord
from tests.fuzz.strategies import json_values, odd_text, records, values, well_formed_records

JSON_BLANK = " \t\r\n"


def as_json(value: Any) -> bytes:
    """JSON text as a careless writer makes it: surrogates written as they are (invalid UTF-8)."""
    return json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")


# one line of a JSON Lines file: a record, a JSON value that is no object, broken JSON, raw bytes
lines = st.one_of(
    records.map(as_json), well_formed_records.map(as_json), json_values.map(as_json),
    odd_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40), st.just(b"{\"answer\": \"cut"), st.sampled_from([b"", b" ", b"\t", b"\r"]),
).map(lambda line: line.replace(b"\n", b" "))  # one line each: a line break would make two inputs


def score_file(path: Path) -> list[ScoredRecord]:
    return list(score_stream(read_records(path), ["lexical"]))


def check_rows(rows: list[ScoredRecord]) -> None:
    for row in rows:
        [score] = row.scores
        assert score.ok or (score.error and score.reason), score


@settings(max_examples=150)
@given(content=st.lists(lines, max_size=8), ending=st.sampled_from([b"\n", b"\r\n"]))
@example(content=[b"\r\x00", b'{"answer": "a\rb"}'], ending=b"\n")  # found: a stray \r made two inputs of one line
def test_every_non_blank_jsonl_line_gives_one_row_in_order(content: list[bytes], ending: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.jsonl"
        path.write_bytes(b"".join(line + ending for line in content))
        rows = score_file(path)
        counted = count_records(path)
    wanted = [(n, line) for n, line in enumerate(content, start=1) if line.strip(JSON_BLANK.encode())]
    assert len(rows) == len(wanted) == counted
    check_rows(rows)
    for (number, line), row in zip(wanted, rows, strict=True):
        try:
            value = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            value = None
        if not isinstance(value, dict):
            assert row.id == f"line-{number}"
            assert row.scores[0].error.startswith(f"invalid record: line {number} is")


# --------------------------------------------------------------------------------------- Parquet
def column(kind: str) -> st.SearchStrategy[Any]:
    """Values of one Arrow type (a Parquet column has one), or null."""
    safe_text = odd_text.map(lambda t: t.encode("utf-8", "replace").decode("utf-8"))  # Arrow strings are UTF-8
    element = {
        "string": safe_text, "int": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "float": st.floats(allow_nan=True), "bool": st.booleans(),
        "strings": st.lists(safe_text, max_size=3), "ints": st.lists(st.integers(0, 9), max_size=3),
        "documents": st.lists(st.fixed_dictionaries({"page_content": safe_text}), max_size=3),
        "struct": st.fixed_dictionaries({"text": safe_text, "n": st.integers(0, 9)}),
    }[kind]
    return st.one_of(st.none(), element)


KINDS = ["string", "int", "float", "bool", "strings", "ints", "documents", "struct"]


@st.composite
def tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows whose columns each have one type, chosen among the right ones and wrong ones."""
    size = draw(st.integers(min_value=0, max_value=6))
    kinds = {name: draw(st.sampled_from(KINDS)) for name in
             draw(st.sets(st.sampled_from(["id", "question", "contexts", "answer", "language", "metadata", "extra"]),
                          min_size=1))}
    # half the time the columns a record needs have their right types
    if draw(st.booleans()):
        kinds.update(question="string", contexts=draw(st.sampled_from(["strings", "documents"])), answer="string")
    return [{name: draw(column(kind)) for name, kind in kinds.items()} for _ in range(size)]


@settings(max_examples=60)
@given(rows=tables(), batch_rows=st.sampled_from([1, 2, 1024]))
def test_every_parquet_row_gives_one_row_in_order(rows: list[dict[str, Any]], batch_rows: int) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from groundtrace.io import read_parquet

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.parquet"
        names = list(rows[0]) if rows else ["answer"]
        pq.write_table(pa.Table.from_pylist(rows) if rows else pa.table({"answer": pa.array([], pa.string())}), path)
        read = list(read_parquet(path, batch_rows=batch_rows))
        scored = score_file(path)
        counted = count_records(path)
    assert len(read) == len(scored) == counted == len(rows)
    assert all(set(row) == set(names) for row in read)
    check_rows(scored)


@settings(max_examples=60)
@given(items=st.lists(values, max_size=5))
def test_any_python_value_as_input_gives_one_row(items: list[Any]) -> None:
    rows = list(score_stream(items, ["lexical"]))
    assert len(rows) == len(items)
    check_rows(rows)


def test_standard_input_is_read_as_a_file_is(tmp_path) -> None:
    from typer.testing import CliRunner

    from groundtrace.cli import app

    lines = b'{"id": "a", "question": "q", "contexts": ["Paris is in France."], "answer": "Paris\\r is in France."}\n\r\n[1]\n'
    result = CliRunner().invoke(app, ["score", "-", "-m", "lexical", "-o", str(tmp_path / "out.jsonl")], input=lines)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == ["a", "line-3"]
