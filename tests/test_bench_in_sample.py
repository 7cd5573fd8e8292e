"""The bench says when a metric was trained on the very file it measures (issue 29: grounding's in-sample AUC on
ragtruth_qa_dev was printed like any other): groundtrace.measure.provenance, a metric's optional trained_on."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from groundtrace import metrics as registry
from groundtrace.cli import app
from groundtrace.metrics.lexical import LexicalMetric
from groundtrace.measure.provenance import records_sha256, trained_on
from tests.conftest import shared_data

runner = CliRunner()
ROWS = [{"id": "a", "question": "What may students do?", "contexts": ["Students borrow books."],
         "answer": "Students borrow books.", "label": 0},
        {"id": "b", "question": "What may students do?", "contexts": ["Students borrow books."],
         "answer": "Teachers sell magazines.", "label": 1},
        {"id": "c", "question": "Где офис?", "contexts": ["Офис в Казани."], "answer": "Офис в Москве.", "label": 1}]
LINE = ("trained_lexical was trained on train.jsonl (sha256 {short}…): its numbers here are in-sample and "
        "optimistic; see the model card's cross-validated figures")


class TrainedLexical(LexicalMetric):
    name = "trained_lexical"
    trained_on = [{"name": "train.jsonl", "sha256": records_sha256(ROWS)}]


@pytest.fixture(autouse=True)
def trained_metric(monkeypatch):
    monkeypatch.setitem(registry._registered, TrainedLexical.name, TrainedLexical)


def write(path, rows, **dumps):
    path.write_text("".join(json.dumps(row, **dumps) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_copy_of_a_training_file_is_in_sample_however_it_is_serialised(tmp_path):
    # keys in another order, other spacing, non-ASCII unescaped, new ids, another order of records
    rows = [dict(reversed(list({**row, "id": f"x{i}"}.items()))) for i, row in enumerate(reversed(ROWS))]
    copy = write(tmp_path / "copy.jsonl", rows, ensure_ascii=False, indent=None, separators=(",", ":"))
    result = runner.invoke(app, ["bench", str(copy), "-m", "trained_lexical", "-m", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["trained_lexical"]["in_sample"] is True
    assert report["trained_lexical"]["trained_on"] == TrainedLexical.trained_on[0]
    assert (report["lexical"]["in_sample"], report["lexical"]["trained_on"]) == (False, None)
    assert result.stderr.strip() == LINE.format(short=records_sha256(ROWS)[:12])


def test_the_table_marks_the_row_and_says_why_even_for_the_first_records_only(tmp_path):
    copy = write(tmp_path / "copy.jsonl", ROWS)
    result = runner.invoke(app, ["bench", str(copy), "-m", "trained_lexical", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "trained_lexical (in-sample)" in result.stdout
    assert LINE.format(short=records_sha256(ROWS)[:12]) in result.stdout.splitlines()


def test_a_file_with_one_text_changed_is_not_in_sample(tmp_path):
    changed = write(tmp_path / "other.jsonl", [*ROWS[:2], {**ROWS[2], "answer": "Офис в Самаре."}])
    result = runner.invoke(app, ["bench", str(changed), "-m", "trained_lexical"])
    assert result.exit_code == 0, result.output
    assert "in-sample" not in result.output and "trained_lexical (in" not in result.stdout


def test_a_broken_trained_on_is_logged_and_declares_nothing(caplog):
    class Broken:
        name = "broken"

        @property
        def trained_on(self):
            raise OSError("card missing")

    with caplog.at_level(logging.WARNING, logger="groundtrace.measure.provenance"):
        assert trained_on(Broken()) == []
    assert "broken: its trained_on could not be read (OSError: card missing)" in caplog.text
    assert trained_on(object()) == [] and trained_on(LexicalMetric()) == []


def test_the_shipped_detector_declares_ragtruth_qa_dev_by_its_real_hash():
    from groundtrace.io import read_layout
    from groundtrace.metrics import get_metric

    path = shared_data("ragtruth_qa_dev.jsonl")  # the real hash is computed from ../shared/data
    files = {file["name"]: file for file in trained_on(get_metric("grounding"))}
    assert files["ragtruth_qa_dev.jsonl"]["sha256"] == records_sha256(read_layout(path, None).rows)
    assert {"halueval_qa_train.jsonl", "uhgeval_zh_train.jsonl", "paraphrase_train_en.jsonl"} <= set(files)
    assert not {"halueval_qa_dev.jsonl", "halluqa_zh.jsonl", "uhgeval_zh_dev.jsonl"} & set(files)  # measurement only
