"""A labelled file with two languages and three conversations, scored by lexical: the views' figures
are checked against `groundtrace bench` on it, in Python and in Chromium."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from groundtrace.scoring.engine import Evaluator
from groundtrace.score import ScoredRecord
from tests.conftest import shared_data


@dataclass
class Labelled:
    path: Path  # the labelled JSONL bench reads
    rows: list[ScoredRecord]  # its records scored by lexical, in file order
    labels: dict[str, int]  # record id -> 0/1


@pytest.fixture(scope="session")
def bench_file(tmp_path_factory) -> Labelled:
    """20 English RAGTruth and 20 Chinese HalluQA answers, both classes in each, in conversations chat-0..2."""
    lines = [json.loads(line) for name in ("ragtruth_qa_dev.jsonl", "halluqa_zh.jsonl")
             for line in shared_data(name).read_text(encoding="utf-8").splitlines()[:20]]
    for i, row in enumerate(lines):
        row["session_id"] = f"chat-{i % 3}"
    path = tmp_path_factory.mktemp("labelled") / "labelled.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in lines), encoding="utf-8")
    labels = {row["id"]: row["label"] for row in lines}
    assert {(row["language"], row["label"]) for row in lines} == {("en", 0), ("en", 1), ("zh", 0), ("zh", 1)}
    return Labelled(path, list(Evaluator("lexical").evaluate(lines)), labels)
