"""The verdict file under faults (issue 54, rows 3 to 7): GROUNDTRACE_VERDICT_FILE naming a FIFO or /dev/zero, a
missing or cut file, a misspelt metric name, the file rewritten by another process while the application runs,
`fit -o` onto a full disk, a NaN or infinite number in the file, a metric this installation does not have. Real
FIFOs, devices, child processes, a real tmpfs filled up (where this user may mount one) and a real file size
limit; every bound is a timeout, never a measured time."""

from __future__ import annotations

import csv
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import groundtrace
from groundtrace.backends.verdict import MAX_FILE_BYTES, Component, LinearModel, VerdictFileError, VerdictModel
from groundtrace.capture import kit
from groundtrace.metrics import get_metric
from groundtrace.metrics.combined import DEFAULT_FILE
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from tests.custom_sinks import PlainSink

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "The museum opens at 9 am and closes at 6 pm every day of the week."
LEXICAL_ONLY = LinearModel(features=["lexical"], mean=[0.0], scale=[1.0], coef=[1.0], intercept=0.0)


def verdict(threshold: float) -> VerdictModel:
    return VerdictModel(components=[Component("lexical")], model=LEXICAL_ONLY, threshold=threshold)


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    return {**env, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "250", **extra}


@pytest.fixture
def shared(monkeypatch):
    """The process-wide Monitor built afresh from this test's environment, and forgotten after it."""
    for name in [n for n in os.environ if n.startswith("GROUNDTRACE_")]:
        monkeypatch.delenv(name)
    kit.reset_shared_monitor()
    yield
    kit.reset_shared_monitor()


def one_turn() -> None:
    with groundtrace.turn("When does the museum open?") as t:
        t.add_contexts([CONTEXT])
        t.answer = "It opens at 9 am."


# ----------------------------------------------------------------------------------- row 3: special files
def test_a_verdict_file_that_is_a_fifo_is_refused_at_once_and_no_request_waits_on_it(tmp_path, monkeypatch, shared, caplog):
    fifo = tmp_path / "verdict.json"
    os.mkfifo(fifo)  # what `GROUNDTRACE_VERDICT_FILE=<(cat verdict.json)` hands the application
    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(fifo))
    requests = [threading.Thread(target=one_turn, daemon=True) for _ in range(3)]
    try:
        with caplog.at_level(logging.WARNING, logger="groundtrace"):
            for request in requests:
                request.start()
            for request in requests:
                request.join(30)
            finished = sum(not request.is_alive() for request in requests)
    finally:  # before the fix each request sits in open() until a writer comes: be that writer until all have ended
        deadline = time.monotonic() + 30
        while any(request.is_alive() for request in requests) and time.monotonic() < deadline:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader at this moment
                time.sleep(0.01)
    assert finished == 3
    said = [r.getMessage() for r in caplog.records if "cannot be built" in r.getMessage()]
    assert len(said) == 1 and f"verdict file {fifo} is a FIFO: only a regular file is read" in said[0], said


def test_dev_zero_as_the_verdict_file_is_refused_before_a_byte_is_read():
    # in a process of its own under a 1 GiB address-space bound: before the fix the read of /dev/zero never ends
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from groundtrace.metrics import get_metric
        try:
            get_metric("combined")
        except Exception as error:
            print(type(error).__name__, error)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=environment(GROUNDTRACE_VERDICT_FILE="/dev/zero"))
    assert run.stdout.startswith("VerdictFileError verdict file /dev/zero is a device: only a regular file is read"), \
        (run.stdout, run.stderr[-2000:])


def test_a_verdict_file_over_the_size_cap_is_refused_with_the_cap_said(tmp_path):
    big = tmp_path / "verdict.json"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # a real regular file, sparse: nothing on disk
    with pytest.raises(VerdictFileError, match=rf"verdict file {big} is 1,048,577 bytes, over the 1,048,576"):
        VerdictModel.load(big)


# --------------------------------------------------- row 4: a missing or cut file, a misspelt metric name
def _cut(tmp_path: Path) -> dict[str, str]:
    cut = tmp_path / "verdict.json"
    cut.write_bytes(DEFAULT_FILE.read_bytes()[:100])  # what a full disk or a killed editor leaves
    return {"GROUNDTRACE_VERDICT_FILE": str(cut)}


@pytest.mark.parametrize(("setting", "words"), [
    (lambda tmp: {"GROUNDTRACE_VERDICT_FILE": str(tmp / "missing.json")},
     ["GROUNDTRACE_VERDICT_FILE={tmp}/missing.json", "verdict file {tmp}/missing.json does not exist",
      "groundtrace fit -o {tmp}/missing.json", "restart the application"]),
    (_cut, ["verdict file {tmp}/verdict.json is not readable JSON", "cut short",
            "write it again with `groundtrace fit -o {tmp}/verdict.json`"]),
    (lambda tmp: {"GROUNDTRACE_METRICS": "groundng"},
     ["GROUNDTRACE_METRICS=groundng", "unknown metric 'groundng'; available: ", "grounding", "Fix the setting"]),
], ids=["missing", "cut", "misspelt-metric"])
def test_a_setting_the_monitor_cannot_be_built_from_is_said_once_in_its_own_words_and_not_rebuilt_per_request(
        tmp_path, monkeypatch, shared, caplog, setting, words):
    for name, value in setting(tmp_path).items():
        monkeypatch.setenv(name, value)
    builds = []
    original = Monitor.from_settings.__func__

    def counted(cls, *args, **kwargs):
        builds.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(Monitor, "from_settings", classmethod(counted))
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        for _ in range(5):  # five requests: nothing raises into them
            one_turn()
    assert len(builds) == 1
    said = [r.getMessage() for r in caplog.records if "cannot be built" in r.getMessage()]
    assert len(said) == 1, said
    for word in words:
        assert word.format(tmp=tmp_path) in said[0], said[0]


# ------------------------------------------------------------- row 5: the file rewritten while the app runs
def _scoring_children() -> list[int]:
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                if b"groundtrace.scoring.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(int(pid))
            except OSError:
                pass
    return pids


def _wait_dead(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.02)
    raise AssertionError(f"scoring process {pid} still alive")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the scoring process through /proc")
def test_the_verdict_in_force_is_the_one_loaded_at_start_when_another_process_rewrites_the_file(tmp_path, monkeypatch):
    path = tmp_path / "verdict.json"
    verdict(0.595).save(path)
    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(path))
    sink = PlainSink()
    with Monitor(["combined"], [sink], isolation="process", flush_at_exit=False) as monitor:
        monitor.submit(Record(id="before", question="When?", contexts=[CONTEXT], answer="It opens at 9 am."))
        assert monitor.flush(60)
        # `groundtrace fit -o` (or the review app's fit button) in another process writes a new verdict
        subprocess.run([sys.executable, "-c", "import sys; from groundtrace.backends.verdict import *; VerdictModel("
                        "components=[Component('lexical')], model=LinearModel(features=['lexical'], mean=[0.0], "
                        "scale=[1.0], coef=[1.0], intercept=0.0), threshold=0.01).save(sys.argv[1])", str(path)],
                       check=True, timeout=60, env=environment())
        assert VerdictModel.load(path).threshold == 0.01
        # and the scoring process is restarted (it died: the OOM killer, a record past its time budget)
        [child] = _scoring_children()
        os.kill(child, signal.SIGKILL)
        _wait_dead(child)
        monitor.submit(Record(id="after", question="When?", contexts=[CONTEXT], answer="It opens at 9 am."))
        assert monitor.flush(60)
        shown = monitor.metrics[0].threshold
    scores = {record.id: score for record, [score] in sink.got}
    assert set(scores) == {"before", "after"} and scores["after"].ok, scores
    # the Monitor's metric and every Score agree: the verdict read at start, with the hash of what was read
    assert shown == scores["before"].threshold == scores["after"].threshold == 0.595
    assert scores["before"].details["file_sha256"] == scores["after"].details["file_sha256"] != ""
    assert scores["before"].details["file_sha256"] == monitor.metrics[0].sha256


# ---------------------------------------------------------------------------- row 6: fit onto a full disk
def labelled_csv(path: Path) -> None:
    """180 labelled answers in English, Russian and Chinese (each language gets an offset in the verdict)."""
    things = ["museum", "library", "pool", "bakery", "station", "garden", "theatre", "market"]
    rows = []
    for i in range(120):
        thing, opens, closes = things[i % len(things)], 6 + i % 5, 17 + i % 4
        context = f"The {thing} opens at {opens} am and closes at {closes} pm. Tickets cost {i % 9 + 3} euros for adults."
        bad = i % 3 == 0
        answer = (f"The {thing} is closed on Mondays and tickets are free for everyone born after {1900 + i}." if bad
                  else f"The {thing} opens at {opens} am and closes at {closes} pm.")
        rows.append([f"r{i}", f"When does the {thing} open?", json.dumps([context]), answer, int(bad)])
    for i in range(60):
        bad = i % 3 == 0
        if i % 2:
            context = f"Музей открывается в {8 + i % 3} часов и закрывается в {18 + i % 3} часов."
            answer = "Музей бесплатный и работает круглосуточно без выходных." if bad else f"Музей открывается в {8 + i % 3} часов."
            question = "Когда открывается музей?"
        else:
            context = f"博物馆早上{8 + i % 3}点开门，晚上{18 + i % 3}点关门。"
            answer = "博物馆全天免费开放，没有休息日。" if bad else f"博物馆早上{8 + i % 3}点开门。"
            question = "博物馆几点开门？"
        rows.append([f"x{i}", question, json.dumps([context], ensure_ascii=False), answer, int(bad)])
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "contexts", "answer", "label"])
        writer.writerows(rows)


#: options the verdict keeps per component (their defaults): with the input's long name and its three languages the
#: new verdict takes two 4 KiB pages (about 4,300 bytes), the old one one, so that a write that truncates the old
#: file first (as before the fix) runs out of room part-way
FIT_OPTIONS = [word for metric, named in (("lexical", (("bleu_weight", 0.6), ("keyword_weight", 0.4))),
                                          ("facts", (("concept_weight", 0.5),)))
               for name, value in (("max_answer_chars", 100000), ("max_context_chars", 1000000), ("threshold", 0.5), *named)
               for word in ("-O", f"{metric}.{name}={value}")]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A real 64 KiB tmpfs (mounting one needs root: skipped without)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> None:
    """Every page of ``disk`` taken."""
    with open(disk / "filler", "wb", buffering=0) as handle:
        try:
            while handle.write(b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass


def _one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    text = run.stdout + run.stderr
    assert "Traceback" not in text, text[-3000:]
    [line] = [line for line in text.splitlines() if line.startswith("error:")]
    return line


def test_fit_onto_a_full_tmpfs_says_one_line_and_leaves_the_old_verdict_whole(tmp_path, tiny_tmpfs):
    answers = tmp_path / ("answers-" + "a" * 200 + ".csv")  # its name is kept in the verdict, twice
    labelled_csv(answers)
    old = tiny_tmpfs / "verdict.json"
    verdict(0.5).save(old)  # the verdict in use: one page
    before = old.read_bytes()
    _fill(tiny_tmpfs)
    run = subprocess.run([sys.executable, "-m", "groundtrace.cli", "fit", str(answers), "-m", "lexical", "-m", "facts",
                          *FIT_OPTIONS, "-o", str(old)], capture_output=True, text=True, timeout=300, env=environment())
    assert run.returncode == 2, (run.stdout[-2000:], run.stderr[-2000:])
    line = _one_line_error(run)
    assert f"verdict file {old} not written: No space left on device (ENOSPC); the file there is as it was" in line, line
    assert old.read_bytes() == before and VerdictModel.load(old).threshold == 0.5
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler", "verdict.json"]  # no temporary file left


def test_fit_past_the_file_size_limit_says_one_line_and_leaves_the_old_verdict_whole(tmp_path):
    # no disk to fill without root: RLIMIT_FSIZE makes every write past 2,048 bytes of a file fail, as a full disk
    # does, with EFBIG instead of ENOSPC (SIGXFSZ ignored, so the write fails rather than the process)
    answers = tmp_path / "answers.csv"
    labelled_csv(answers)
    old = tmp_path / "verdict.json"
    verdict(0.5).save(old)
    before = old.read_bytes()

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    run = subprocess.run([sys.executable, "-m", "groundtrace.cli", "fit", str(answers), "-m", "lexical", "-o", str(old)],
                         capture_output=True, text=True, timeout=300, env=environment(PYTHONDONTWRITEBYTECODE="1"),
                         preexec_fn=limited)
    assert run.returncode == 2, (run.stdout[-2000:], run.stderr[-2000:])
    line = _one_line_error(run)
    assert f"verdict file {old} not written: File too large (EFBIG); the file there is as it was" in line, line
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.csv", "verdict.json"]


# ------------------------------------------------------------ row 7: numbers that are not numbers
@pytest.mark.parametrize(("change", "field"), [
    (lambda raw: raw["model"].update(intercept=float("nan")), "model.intercept is nan"),
    (lambda raw: raw["model"].update(language_offsets={"en": float("inf")}), "model.language_offsets.en is inf"),
    (lambda raw: raw["model"].update(language_offsets={"ru": float("-inf")}), "model.language_offsets.ru is -inf"),
    (lambda raw: raw["model"]["coef"].__setitem__(1, float("nan")), "model.coef[1] is nan"),
    (lambda raw: raw.update(threshold=float("nan")), "threshold is nan"),
], ids=["nan-intercept", "inf-offset", "minus-inf-offset", "nan-coef", "nan-threshold"])
def test_a_verdict_with_a_number_that_is_not_finite_is_refused_at_load_with_the_field_named(tmp_path, change, field):
    raw = json.loads(DEFAULT_FILE.read_text(encoding="utf-8"))
    change(raw)
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(raw), encoding="utf-8")  # json writes NaN and Infinity, and reads them back
    with pytest.raises(VerdictFileError, match=rf"verdict file {path} .*{field.replace('[', '.').replace(']', '.')}"):
        get_metric("combined", file=str(path))


# -------------------------------------------------------------- smaller: a metric of another installation
def test_a_verdict_naming_a_metric_this_installation_lacks_makes_the_monitor_name_the_file(tmp_path, monkeypatch):
    raw = json.loads(DEFAULT_FILE.read_text(encoding="utf-8"))
    raw["components"][0]["metric"] = raw["model"]["features"][0] = "acme_detector"  # a plugin installed elsewhere
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    monkeypatch.setenv("GROUNDTRACE_VERDICT_FILE", str(path))
    with pytest.raises(VerdictFileError) as refused:
        Monitor(isolation="thread", lazy=True, flush_at_exit=False)
    assert not isinstance(refused.value, KeyError)
    assert f"verdict file {path} combines metric 'acme_detector', which this installation does not have" in str(refused.value)
