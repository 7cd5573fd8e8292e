"""The labels file is a log that heals: a write a full disk cut short leaves nothing behind, a crash's fragment is
never glued to the next decision, and every reader skips a fragment anywhere, counting it by its line number. On a
real tmpfs where root can mount one."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from pathlib import Path

import pytest

from groundtrace.io.labels import LabelsFileError, append, decide, iter_decisions, read_decisions, read_labels


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, mounted for this test (root only; skipped, saying why, elsewhere)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until about ``leave`` bytes are free; the ballast file, to free them later."""
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as handle:  # unbuffered: nothing left to flush at close
        try:
            while True:
                handle.write(b"\0" * 512)
        except OSError:
            pass
    size = ballast.stat().st_size
    os.truncate(ballast, max(0, size - leave))
    return ballast


def test_a_full_disk_leaves_no_fragment_and_labelling_resumes_once_space_is_back(small_disk, caplog):
    labels = small_disk / "labels.jsonl"
    append(labels, decide("r1", "supported"))
    ballast = fill(small_disk, 0)
    with pytest.raises(OSError):
        for i in range(200):  # a decision with a long note: the disk takes part of it, or none
            append(labels, decide(f"r{i + 2}", "unsupported", "n" * 3000))
    on_disk = labels.read_bytes()
    assert on_disk.endswith(b"\n") and all(json.loads(line) for line in on_disk.splitlines())  # whole lines only
    kept = list(read_decisions(labels))
    ballast.unlink()
    append(labels, decide("after-1", "unsupported"))
    append(labels, decide("after-2", "supported"))
    assert list(read_decisions(labels)) == [*kept, "after-1", "after-2"]
    assert read_labels(labels)["after-1"] == 1 and "not whole decisions" not in caplog.text


def test_a_crash_fragment_is_ended_not_glued_and_skipped_with_its_line_number(tmp_path, caplog):
    labels = tmp_path / "labels.jsonl"
    append(labels, decide("a", "unsupported"))
    with open(labels, "a", encoding="utf-8") as handle:
        handle.write('{"id": "b", "lab')  # a crash in the middle of a write: no newline
    append(labels, decide("c", "supported"))  # the next decision ends the fragment first
    append(labels, decide("d", "skip"))
    assert labels.read_text().splitlines()[1] == '{"id": "b", "lab'
    skipped: list[int] = []
    assert [d.id for d in iter_decisions(labels, skipped)] == ["a", "c", "d"] and skipped == [2]
    with caplog.at_level(logging.WARNING, logger="groundtrace.review"):
        assert read_labels(labels) == {"a": 1, "c": 0}
        read_decisions(labels)  # said once per file and lines, not at every read
    said = [r.getMessage() for r in caplog.records if "not whole decisions" in r.getMessage()]
    assert len(said) == 1 and re.search(r"skipped 1 line\(s\) .*\(line 2\)", said[0])


def test_a_fragment_in_the_middle_is_skipped_by_every_reader(tmp_path):
    """fit, bench and report read labels through groundtrace.io.labelled, the review app through read_decisions."""
    from groundtrace.io.labelled import read_review_labels

    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "a", "label": "unsupported"}\n{"id": "b", "la\n{"id": "c", "label": "supported"}\n'
                      '{"id": "d", "label": "skip"}\n', encoding="utf-8")
    assert read_labels(labels) == {"a": 1, "c": 0}
    assert read_review_labels(labels) == ({"a": 1, "c": 0}, {"d"})


def test_a_file_of_fragments_only_is_not_a_labels_file(tmp_path):
    other = tmp_path / "labels.csv"
    other.write_text("id,label\nr1,1\n", encoding="utf-8")
    with pytest.raises(LabelsFileError, match="no line is a review decision"):
        read_decisions(other)


def test_the_review_app_answers_507_on_a_full_disk_and_saved_again_once_space_is_back(small_disk):
    pytest.importorskip("starlette")
    from groundtrace.review.app import Review
    from tests.review.samples import many
    from tests.review.test_review_app import client_for

    labels = small_disk / "labels.jsonl"
    client, token = client_for(Review(many(12), labels, reviewer="ana"))
    assert client.post("/api/label", json={"id": "r001", "label": "supported"}, headers=token).status_code == 200
    ballast = fill(small_disk, 0)
    answers = [client.post("/api/label", json={"id": f"r{i:03d}", "label": "unsupported", "note": "n" * 1900},
                           headers=token) for i in range(2, 6)]  # the file's last page fills, then the disk refuses
    codes = [answer.status_code for answer in answers]
    assert 507 in codes and set(codes) <= {200, 507}
    assert "did not take the decision" in answers[codes.index(507)].json()["error"]
    saved_before = [f"r{i:03d}" for i, code in zip(range(2, 6), codes, strict=True) if code == 200]
    assert client.get("/api/queue", headers=token).status_code == 200  # the file still reads
    ballast.unlink()
    for record_id in ("r008", "r009"):
        saved = client.post("/api/label", json={"id": record_id, "label": "unsupported"}, headers=token)
        assert saved.status_code == 200 and saved.json()["saved"]["id"] == record_id
    # "saved" was said for exactly the decisions on disk
    assert list(read_decisions(labels)) == ["r001", *saved_before, "r008", "r009"]
    assert client.get("/api/queue", headers=token).status_code == 200


def test_a_huge_body_is_refused_before_it_is_read_and_a_bad_trace_url_is_one_line(tmp_path):
    pytest.importorskip("starlette")
    from typer.testing import CliRunner

    from groundtrace.cli import app
    from groundtrace.review.app import MAX_BODY_BYTES, Review
    from tests.review.samples import many, write
    from tests.review.test_review_app import client_for

    labels = tmp_path / "labels.jsonl"
    client, token = client_for(Review(many(3), labels))
    declared = client.post("/api/label", content=b"x" * (MAX_BODY_BYTES + 1), headers=token)
    assert declared.status_code == 413 and not labels.exists()

    def chunks():  # no Content-Length: read up to the bound, then refused
        for _ in range(100):
            yield b" " * 4096

    streamed = client.post("/api/label", content=chunks(), headers=token)
    assert streamed.status_code == 413
    assert client.post("/api/label", json={"id": "r001", "label": "skip"}, headers=token).status_code == 200

    scores = write(many(3), tmp_path / "scores.jsonl")
    result = CliRunner().invoke(app, ["review", str(scores), "--trace-url", "javascript:alert(1)", "--no-open"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        "error: trace URL template 'javascript:alert(1)': it must start with http:// or https://"]
