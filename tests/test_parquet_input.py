"""groundtrace score and bench read Parquet as they read JSONL: the same records, the same Scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.io import count_records, read_records

pq = pytest.importorskip("pyarrow.parquet", reason="the parquet extra is not installed: pip install 'groundtrace[parquet]'")
import pyarrow as pa  # noqa: E402

runner = CliRunner()
ROWS = [
    {"id": "1", "question": "How much is the dorm?", "contexts": ["The dorm costs 1,879 roubles a month."],
     "answer": "The dorm costs 2,500 roubles a month.", "label": 1},
    {"id": "2", "question": "When does the library open?", "contexts": ["The library opens at 9.", "It closes at 18."],
     "answer": "The library opens at 9.", "label": 0},
    {"id": "3", "question": "Кто управляет столовой?", "contexts": ["Столовой управляет ООО «Веста»."],
     "answer": "Столовой управляет ООО «Веста».", "label": 0},
    {"id": "4", "question": "食堂几点开门？", "contexts": ["食堂早上七点开门。"], "answer": "食堂早上八点开门。", "label": 1},
]


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    jsonl = tmp_path / "answers.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    parquet = tmp_path / "answers.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), parquet, row_group_size=2)  # two row groups: read in turn
    return jsonl, parquet


def test_parquet_rows_are_the_jsonl_records(files: tuple[Path, Path]) -> None:
    jsonl, parquet = files
    assert list(read_records(parquet)) == list(read_records(jsonl)) == ROWS
    assert count_records(parquet) == count_records(jsonl) == 4


def test_score_and_bench_give_the_same_numbers_from_parquet(files: tuple[Path, Path], tmp_path: Path) -> None:
    outputs = {}
    for path in files:
        outputs[path.suffix] = tmp_path / f"out{path.suffix}.jsonl"
        result = runner.invoke(app, ["score", str(path), "-m", "lexical", "-o", str(outputs[path.suffix])])
        assert result.exit_code == 0, result.output
    strip = lambda path: [{**json.loads(line), "scores": [{**s, "latency_ms": None} for s in json.loads(line)["scores"]]}  # noqa: E731
                          for line in path.read_text(encoding="utf-8").splitlines()]
    assert strip(outputs[".parquet"]) == strip(outputs[".jsonl"])
    assert [row["id"] for row in strip(outputs[".parquet"])] == ["1", "2", "3", "4"]
    reports = [json.loads(runner.invoke(app, ["bench", str(path), "-m", "lexical", "--json"]).stdout)["lexical"]
               for path in files]
    for key in ("n", "positives", "auc", "f1", "threshold"):
        assert reports[0][key] == reports[1][key], key
    assert reports[1]["n"] == 4 and reports[1]["positives"] == 2
