"""`groundtrace watch`: each answer's scores from a scores file, then what is appended to it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.cli.watch import Follower, metric_names
from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord, Span

ANSWER = "The capital is Berlin, founded in 1200."


def row(i, question, scores):
    return ScoredRecord(record=Record(id=f"r{i}", question=question, contexts=["Paris is the capital."],
                                      answer=ANSWER), scores=scores).model_dump_json() + "\n"


def flagged(metric="lexical", value=0.07):
    return Score(metric=metric, value=value, higher_is_better=True, hallucinated=True, threshold=0.5,
                 spans=[Span(start=15, end=21, text="Berlin"), Span(start=23, end=38, text="founded in 1200")])


def grounded(metric="grounding", value=0.91):
    return Score(metric=metric, value=value, higher_is_better=True, hallucinated=False, threshold=0.5)


def error(metric="nli"):
    return Score(metric=metric, higher_is_better=True, error="model 'x' cannot be loaded:\n  no network")


LINES = [
    row(1, "What is the capital of France and when was it founded, please tell me?",
        [flagged(), grounded(), error()]),
    row(2, "Where is Paris?", [grounded("lexical", 1.0), grounded()]),
    row(3, None, [flagged("grounding", 0.2)]),
]

BLOCK_1 = ("r1  What is the capital of France and when …\n"
           "  lexical    0.07  flagged\n"
           '    "Berlin", "founded in 1200"\n'
           "  grounding  0.91  grounded\n"
           "  nli          -    error: model 'x' cannot be loaded: no network\n\n")
BLOCK_2 = ("r2  Where is Paris?\n"
           "  lexical    1.00  grounded\n"
           "  grounding  0.91  grounded\n\n")
BLOCK_3 = ("r3  (no question)\n"
           "  grounding  0.20  flagged\n"
           '    "Berlin", "founded in 1200"\n\n')


def watch(*args):
    return CliRunner().invoke(app, ["watch", *args])


def scores_file(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(LINES))
    return path


def test_no_follow_prints_each_answer_plain_when_not_a_terminal(tmp_path):
    result = watch(str(scores_file(tmp_path)), "--no-follow")
    assert result.exit_code == 0, result.output
    assert result.stdout == BLOCK_1 + BLOCK_2 + BLOCK_3
    assert "\x1b[" not in result.stdout


def test_metric_and_flagged_filters(tmp_path):
    path = str(scores_file(tmp_path))
    assert watch(path, "--no-follow", "-m", "lexical", "-m", "nli").stdout == (
        "r1  What is the capital of France and when …\n"
        "  lexical  0.07  flagged\n"
        '    "Berlin", "founded in 1200"\n'
        "  nli        -    error: model 'x' cannot be loaded: no network\n\n"
        "r2  Where is Paris?\n"
        "  lexical  1.00  grounded\n\n")
    assert watch(path, "--no-follow", "--flagged").stdout == BLOCK_1 + BLOCK_3
    assert watch(path, "--no-follow", "--flagged", "-m", "lexical,nli").stdout == (
        "r1  What is the capital of France and when …\n"
        "  lexical  0.07  flagged\n"
        '    "Berlin", "founded in 1200"\n'
        "  nli        -    error: model 'x' cannot be loaded: no network\n\n")
    assert watch(path, "--no-follow", "--last", "1").stdout == BLOCK_3
    assert watch(path, "--no-follow", "--last", "0").stdout == ""
    assert metric_names(["a", "b, c", ""]) == ["a", "b", "c"]


def test_the_default_path_is_the_default_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    (tmp_path / "groundtrace-scores.jsonl").write_text(LINES[1])
    assert watch("--no-follow").stdout == BLOCK_2


def test_a_missing_file_with_no_follow_says_so_and_exits_2(tmp_path):
    result = watch(str(tmp_path / "none.jsonl"), "--no-follow")
    assert result.exit_code == 2
    assert result.stdout == ""
    said = " ".join(result.stderr.split())
    assert said.startswith(
        f"groundtrace watch: no scores yet: {tmp_path / 'none.jsonl'} does not exist (it appears with the first "
        f"scored answer) groundtrace watch: no scored answer in {tmp_path / 'none.jsonl'}. If your application "
        "answered, check:")
    assert said.endswith("docs: troubleshooting, 'I see no scores'")


def test_a_line_that_is_not_a_scored_record_is_skipped_with_a_word(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"not": "a record"}\n' + LINES[1])
    result = watch(str(path), "--no-follow")
    assert result.exit_code == 0
    assert result.stdout == BLOCK_2
    assert "skipped a line that is not a scored record: record: Field required" in result.stderr
    assert "a record" not in result.stderr  # why, never the line's own text


def test_a_torn_line_in_the_middle_is_skipped_by_report_review_and_fit_with_its_true_line_number(tmp_path):
    """Line 2 of 3 cut short (a crash): every reader keeps lines 1 and 3, names line 2, quotes nothing of it."""
    from groundtrace.score import scores_by_id
    from groundtrace.io import read_scored

    path = tmp_path / "scores.jsonl"
    torn = LINES[1][:60]
    path.write_text(LINES[0] + torn + "\n" + LINES[2])
    skipped: list[str] = []
    assert [row.id for row in read_scored(path, skipped)] == ["r1", "r3"]
    assert skipped == ["line 2: not valid JSON (EOF while parsing a value)"]
    assert list(scores_by_id(read_scored(path))) == ["r1", "r3"]
    report = CliRunner().invoke(app, ["report", str(path), "-o", str(tmp_path / "page.html")])
    assert report.exit_code == 0 and "wrote" in report.output and "2 records" in report.output
    assert watch(str(path), "--no-follow").stdout == BLOCK_1 + BLOCK_3


def test_the_follower_waits_for_torn_lines_and_starts_over_after_truncation_or_rotation(tmp_path):
    path = tmp_path / "scores.jsonl"
    follower = Follower(path)
    assert follower.lines() == []  # not there yet
    path.write_text('{"a": 1}\n{"b"')
    assert follower.lines() == [b'{"a": 1}']
    assert follower.lines() == []
    with open(path, "a") as handle:
        handle.write(': 2}\n')
    assert follower.lines() == [b'{"b": 2}']
    path.write_text('{"c": 3}\n')  # truncated and rewritten: shorter than what was read
    assert follower.lines() == [b'{"c": 3}']
    path.rename(tmp_path / "scores.1.jsonl")
    assert follower.lines() == []
    path.write_text('{"d": 4}\n{"e": 5}\n')  # a new file in its place
    assert follower.lines() == [b'{"d": 4}', b'{"e": 5}']
    follower.close()


def _reader(stream, into):
    for line in stream:
        into.put(line)


def _until(lines, text, timeout=20.0):
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line.strip():  # the blank line between answers
            seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} did not come within {timeout} s; saw {seen}")


def test_follow_prints_what_is_appended_after_it_started(tmp_path):
    path = tmp_path / "scores.jsonl"
    env = {**os.environ, "NO_COLOR": "1"}
    watcher = subprocess.Popen([sys.executable, "-m", "groundtrace.cli", "watch", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    out, err = queue.Queue(), queue.Queue()
    readers = [threading.Thread(target=_reader, args=(stream, into), daemon=True)
               for stream, into in ((watcher.stdout, out), (watcher.stderr, err))]
    for reader in readers:
        reader.start()
    try:
        _until(err, "waiting for")
        path.write_text(LINES[1])
        seen = _until(out, "grounding  0.91  grounded")
        assert seen[0].endswith("r2  Where is Paris?\n") and seen[0][:2].isdigit()  # HH:MM:SS first
        with open(path, "a") as handle:  # a line written in two pieces is printed once whole
            handle.write(LINES[2][:30])
            handle.flush()
            time.sleep(0.6)
            handle.write(LINES[2][30:])
        seen = _until(out, '"Berlin", "founded in 1200"')
        assert [line.split("  ", 1)[1] for line in seen[:1]] == ["r3  (no question)\n"]
        assert seen[1:] == ["  grounding  0.20  flagged\n", '    "Berlin", "founded in 1200"\n']
        # the running rate after each arrival (the second: r3 counted with r2), waited for, not raced
        said = _until(err, "grounding 1 of 2 flagged (50%)")
        assert said[-1] == "groundtrace watch: so far: lexical 0 of 1 flagged (0%); grounding 1 of 2 flagged (50%)\n", said
        watcher.send_signal(signal.SIGINT)  # Ctrl-C: exit 0, quietly
        assert watcher.wait(timeout=10) == 0
        for reader in readers:  # each ends at its stream's end: everything the watcher wrote is read
            reader.join(timeout=10)
        said += [line for line in list(err.queue) if line.strip()]
        assert all(line.startswith("groundtrace watch: so far: ") for line in said), said  # and no traceback
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def test_an_empty_scores_file_says_why_there_may_be_no_records_and_how_to_check(tmp_path):
    path = tmp_path / "groundtrace-scores.jsonl"
    path.write_text("")
    result = watch(str(path), "--no-follow")
    assert result.exit_code == 0 and result.stdout == ""
    said = " ".join(result.stderr.split())
    assert said.startswith(f"groundtrace watch: no scored answer in {path}. If your application answered, check:")
    assert "handler.stats() (LangChain) or groundtrace_llamaindex.stats() counts each turn that made no record" in said
    assert "decorate the function with @groundtrace.retrieval" in said
    assert said.endswith("docs: troubleshooting, 'I see no scores'")


def test_the_running_flagged_rate_per_metric_goes_to_stderr(tmp_path):
    path = scores_file(tmp_path)
    result = watch(str(path), "--no-follow", "--last", "1")  # counted over every record, not only those shown
    assert result.stdout == BLOCK_3
    assert result.stderr == ("groundtrace watch: so far: lexical 1 of 2 flagged (50%); grounding 1 of 3 flagged "
                             "(33%); nli none scored, 1 failed\n")
    # with -m, only the metrics shown
    assert watch(str(path), "--no-follow", "-m", "lexical").stderr == "groundtrace watch: so far: lexical 1 of 2 flagged (50%)\n"


def test_terminal_escapes_in_answers_ids_and_errors_are_shown_inert(tmp_path):
    """An answer that writes the clipboard (ESC ] 52) or clears the screen (ESC [ 2 J): watch and score --show write
    those bytes out as text (\\x1b), in every field they may come in by."""
    clipboard, clear = "\x1b]52;c;ZWNobyBwd25lZA==\x07", "\x1b[2J"
    answer = f"Berlin{clear} it is{clipboard}"
    line = ScoredRecord(
        record=Record(id=f"r{clear}1", question="Which city?", contexts=["Paris is the capital."], answer=answer),
        scores=[Score(metric="lexical", value=0.1, higher_is_better=True, hallucinated=True, threshold=0.5,
                      spans=[Span(start=0, end=len(answer), text=answer)]),
                Score(metric="nli", higher_is_better=True, error=f"the model echoed {clipboard}")],
    ).model_dump_json() + "\n"
    path = tmp_path / "scores.jsonl"
    path.write_text(line)
    result = watch(str(path), "--no-follow")
    assert result.exit_code == 0 and "\x1b" not in result.output and "\x07" not in result.output
    assert '"Berlin\\x1b[2J it is\\x1b]52;c;ZWNobyBwd25lZA==\\x07"' in result.stdout
    assert "r\\x1b[2J1" in result.stdout and "error: the model echoed \\x1b]52" in result.stdout
