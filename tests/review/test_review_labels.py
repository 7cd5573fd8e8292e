"""The labels file: one fsynced line per decision, the last one counts, two writers lose nothing, a torn
last line does not make the file unreadable."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from groundtrace.errors import GroundtraceError
from groundtrace.io.labels import LabelsFileError, append, decide, iter_decisions, read_decisions, read_labels


def test_the_last_decision_counts_and_skips_are_not_labels(tmp_path) -> None:
    path = tmp_path / "labels.jsonl"
    append(path, decide("a", "unsupported", "  wrong fee  ", "ana"))
    append(path, decide("b", "skip"))
    append(path, decide("c", "supported"))
    append(path, decide("a", "supported"))

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["id"], line["label"]) for line in lines] == [("a", "unsupported"), ("b", "skip"), ("c", "supported"),
                                                               ("a", "supported")]
    assert lines[0]["note"] == "wrong fee" and lines[0]["reviewer"] == "ana" and lines[0]["at"].endswith("+00:00")
    assert "note" not in lines[1]
    assert {key: d.label for key, d in read_decisions(path).items()} == {"b": "skip", "c": "supported", "a": "supported"}
    assert read_labels(path) == {"c": 0, "a": 0}


def test_bad_decisions_are_refused_before_anything_is_written(tmp_path) -> None:
    with pytest.raises(ValueError, match="one of supported, unsupported, skip"):
        decide("a", "maybe")
    with pytest.raises(ValueError, match="needs the record's id"):
        decide("", "skip")
    assert read_decisions(tmp_path / "none.jsonl") == {}


def test_a_torn_last_line_is_skipped_and_a_foreign_file_is_refused(tmp_path) -> None:
    path = tmp_path / "labels.jsonl"
    append(path, decide("a", "unsupported"))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"id": "b", "lab')  # a crash in the middle of a write
    assert list(read_decisions(path)) == ["a"]

    foreign = tmp_path / "records.jsonl"
    foreign.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    with pytest.raises(LabelsFileError, match="records.jsonl:1: not a review decision") as raised:
        list(iter_decisions(foreign))
    assert isinstance(raised.value, GroundtraceError)


def _write_many(path: str, reviewer: str, n: int) -> None:
    for i in range(n):
        append(path, decide(f"{reviewer}-{i}", "unsupported" if i % 2 else "supported", "x" * 3000, reviewer))


def test_two_reviewers_on_one_file_lose_no_line(tmp_path) -> None:
    path = str(tmp_path / "labels.jsonl")
    writers = [multiprocessing.get_context("spawn").Process(target=_write_many, args=(path, name, 200))
               for name in ("ana", "ben")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    decisions = list(iter_decisions(path))  # every line whole: none interleaved inside another
    assert len(decisions) == 400
    assert len(read_labels(path)) == 400
