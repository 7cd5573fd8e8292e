"""Issue 54, row 12: a hand-edited line of the review labels file that is JSON but no decision (``"label":
"Unsupported"``, an id that is a list, a JSON array or number) or JSON nested too deeply to read is skipped
by every reader with its line number said once at WARNING, never its text, as a torn line is: the review
page, queue and label endpoints answer, a new decision is saved and said saved, fit and bench read the rest."""

from __future__ import annotations

import logging
import re

import pytest

from groundtrace.io.labelled import read_review_labels
from groundtrace.io.labels import LabelsFileError, append, decide, iter_decisions, read_decisions, read_labels

BAD = {
    "label's case": '{"id": "r002", "label": "Unsupported", "note": "SECRET-NOTE"}',
    "a label that is a number": '{"id": "r002", "label": 1}',
    "an id that is a list": '{"id": ["r002"], "label": "unsupported"}',
    "an empty id": '{"id": "", "label": "unsupported"}',
    "no id": '{"label": "supported"}',
    "a note that is an object": '{"id": "r002", "label": "supported", "note": {"why": "x"}}',
    "a JSON array": '["r002", "unsupported"]',
    "a JSON number": "7",
    "deep arrays": "[" * 100_000 + "]" * 100_000,
    "deep objects": '{"a":' * 100_000 + "1" + "}" * 100_000,
}


def labels_with(tmp_path, bad: str):
    """Three decisions, ``bad`` as line 2."""
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(['{"id": "r000", "label": "unsupported"}', bad, '{"id": "r001", "label": "supported"}',
                               '{"id": "r003", "label": "skip"}']) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", list(BAD))
def test_every_reader_skips_the_line_and_says_its_number_once(tmp_path, caplog, kind):
    labels = labels_with(tmp_path, BAD[kind])
    skipped: list[int] = []
    assert [d.id for d in iter_decisions(labels, skipped)] == ["r000", "r001", "r003"] and skipped == [2]
    with caplog.at_level(logging.WARNING, logger="groundtrace.review"):
        assert read_labels(labels) == {"r000": 1, "r001": 0}  # the review app's and report's reader
        assert read_review_labels(labels) == ({"r000": 1, "r001": 0}, {"r003"})  # fit's and bench's
    said = [r for r in caplog.records if "not whole decisions" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert re.search(r"skipped 1 line\(s\) .*\(line 2\)", said[0].getMessage())
    assert "SECRET-NOTE" not in caplog.text and "Unsupported" not in caplog.text


def test_a_file_with_no_decision_at_all_is_still_another_kind_of_file(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(BAD["label's case"] + "\n" + BAD["deep arrays"] + "\n", encoding="utf-8")
    with pytest.raises(LabelsFileError, match=r"labels.jsonl:1: not a review decision"):
        read_decisions(labels)


def test_report_still_tells_a_labels_file_whose_first_line_is_bad(tmp_path):
    from groundtrace.cli.report import is_review_labels

    for kind in ("label's case", "deep arrays"):
        labels = tmp_path / "labels.jsonl"
        labels.write_text(BAD[kind] + '\n{"id": "r000", "label": "unsupported"}\n', encoding="utf-8")
        assert is_review_labels(labels), kind
    records = tmp_path / "records.jsonl"
    records.write_text(BAD["deep arrays"] + '\n{"id": "a", "answer": "x", "label": 1}\n', encoding="utf-8")
    assert not is_review_labels(records)


@pytest.mark.parametrize("kind", ["label's case", "an id that is a list", "deep arrays", "deep objects"])
def test_the_review_app_answers_and_a_new_decision_is_saved(tmp_path, kind):
    pytest.importorskip("starlette")
    from groundtrace.review.app import Review
    from tests.review.samples import many
    from tests.review.test_review_app import client_for

    labels = labels_with(tmp_path, BAD[kind])
    client, token = client_for(Review(many(6), labels, reviewer="ana"))  # the page answers (client_for checks)
    assert client.get("/views").status_code == 200
    queue = client.get("/api/queue", headers=token)
    assert queue.status_code == 200
    assert {item["id"]: item["label"] for item in queue.json()["items"]}["r000"] == "unsupported"
    assert client.get("/api/record", params={"id": "r002"}, headers=token).status_code == 200
    saved = client.post("/api/label", json={"id": "r002", "label": "unsupported"}, headers=token)
    assert saved.status_code == 200 and saved.json()["saved"]["id"] == "r002"
    assert read_labels(labels) == {"r000": 1, "r001": 0, "r002": 1}
    append(labels, decide("r004", "supported"))  # the file goes on as a labels file
    assert list(read_decisions(labels)) == ["r000", "r001", "r003", "r002", "r004"]


def test_a_deeply_nested_request_body_is_a_400_not_a_500(tmp_path):
    pytest.importorskip("starlette")
    from groundtrace.review.app import Review
    from tests.review.samples import many
    from tests.review.test_review_app import client_for

    labels = tmp_path / "labels.jsonl"
    client, token = client_for(Review(many(3), labels))
    answer = client.post("/api/label", content=b"[" * 60_000, headers=token)
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["error"] and not labels.exists()
