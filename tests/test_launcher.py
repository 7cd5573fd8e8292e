"""groundtrace-run: the application runs unchanged, each installed integration instrumented when the application
imports its framework (and not before), and a process that never records starts no scoring process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCHER = Path(sys.executable).with_name("groundtrace-run")


@pytest.fixture
def probe(tmp_path):
    """A real distribution on PYTHONPATH that registers an instrumentor through an entry point."""
    (tmp_path / "probe_pkg.py").write_text(
        "import os\n"
        "def instrument():\n"
        "    with open(os.environ['PROBE_MARKER'], 'a') as f:\n"
        "        f.write('instrumented:' + os.environ.get('GROUNDTRACE_METRICS', '-') + '\\n')\n"
        "def on_import():\n"
        "    import probe_framework\n"
        "    open(os.environ['PROBE_MARKER'], 'a').write(f'on import: {probe_framework.LOADED}\\n')\n"
    )
    (tmp_path / "probe_framework.py").write_text("LOADED = 'after its code ran'\n")
    info = tmp_path / "probe-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[groundtrace.instrumentors]\nprobe = probe_pkg:instrument\n"
                                           "[groundtrace.instrument_on_import]\nprobe_framework = probe_pkg:on_import\n")
    # the application's own sitecustomize must still run
    app_site = tmp_path / "appsite"
    app_site.mkdir()
    (app_site / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['PROBE_MARKER'], 'a').write('app sitecustomize\\n')\n")
    return tmp_path


def run(args, probe, **env):
    environ = {**os.environ, "PYTHONPATH": f"{probe}{os.pathsep}{probe / 'appsite'}",
               "PROBE_MARKER": str(probe / "marker.txt"), **env}
    environ.pop("GROUNDTRACE_ENABLED", None)
    return subprocess.run(args, env=environ, capture_output=True, text=True, timeout=60)


def test_the_launcher_instruments_and_runs_the_program_unchanged(probe):
    result = run([str(LAUNCHER), "--metrics", "lexical", sys.executable, "-c",
                  "import os; print(os.environ['GROUNDTRACE_ENABLED'], 'app ran')"], probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 app ran"
    # the launcher is a Python process too, so the app's sitecustomize runs once in it; then, in the
    # program, groundtrace instruments first and chains to the app's sitecustomize (a scoring child
    # process started by an installed integration runs it too, without instrumenting)
    lines = (probe / "marker.txt").read_text().splitlines()
    assert lines[0] == "app sitecustomize"
    assert lines.count("instrumented:lexical") == 1
    assert lines[lines.index("instrumented:lexical") + 1] == "app sitecustomize"


def test_without_the_launcher_nothing_is_instrumented(probe):
    result = run([sys.executable, "-c", "print('plain')"], probe)
    assert result.stdout.strip() == "plain"
    assert (probe / "marker.txt").read_text().splitlines() == ["app sitecustomize"]


def test_a_missing_command_is_reported(probe):
    result = run([str(LAUNCHER), "no-such-program-xyz"], probe)
    assert result.returncode == 127 and "command not found" in result.stderr


def test_instrument_all_needs_the_flag(monkeypatch):
    from groundtrace.monitor.autoinstrument import instrument_all

    monkeypatch.delenv("GROUNDTRACE_ENABLED", raising=False)
    assert instrument_all() == []


def test_instrument_all_with_a_bad_setting_instruments_nothing_and_says_which(monkeypatch, caplog):
    from groundtrace.monitor.autoinstrument import instrument_all

    monkeypatch.setenv("GROUNDTRACE_ENABLED", "1")
    monkeypatch.setenv("GROUNDTRACE_SAMPLE_RATE", "lots")
    with caplog.at_level("WARNING", logger="groundtrace.monitor.autoinstrument"):
        assert instrument_all() == []
    assert "GROUNDTRACE_SAMPLE_RATE='lots' is not a valid float" in caplog.text


def test_an_application_without_its_own_sitecustomize_starts_cleanly(tmp_path):
    # issue 29: chaining to a sitecustomize that is not there printed "Error in sitecustomize ...
    # KeyError: 'sitecustomize'" on every run
    import groundtrace

    # the groundtrace under test (this checkout's), and no sitecustomize of the application's
    source = Path(groundtrace.__file__).resolve().parents[1]
    environ = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{tmp_path}"}
    environ.pop("GROUNDTRACE_ENABLED", None)
    result = subprocess.run([str(LAUNCHER), sys.executable, "-c", "print(1)"], env=environ, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"
    assert "Error in sitecustomize" not in result.stderr
    assert "KeyError" not in result.stderr


def test_an_integration_that_names_its_framework_is_instrumented_when_the_program_imports_it(probe):
    program = "print('started'); import probe_framework; print('imported')"
    result = run([str(LAUNCHER), sys.executable, "-c", program], probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["started", "imported"]
    lines = (probe / "marker.txt").read_text().splitlines()
    assert lines.count("on import: after its code ran") == 1  # once, right after the module's own code ran
    result = run([str(LAUNCHER), sys.executable, "-c", "print('no framework')"], probe)
    assert (probe / "marker.txt").read_text().splitlines().count("on import: after its code ran") == 1


# ------------------------------------------------------------------------ the installed integrations
CHILDREN = """
import os, time

def children():
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            stat = open(f'/proc/{pid}/stat').read()
        except OSError:
            continue
        if stat.rsplit(')', 1)[1].split()[1] == str(os.getpid()):
            found.append(pid)
    return found
"""
LOADED = ("import sys\n"
          "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'groundtrace', 'groundtrace_langchain', "
          "'groundtrace_llamaindex', 'langchain_core', 'llama_index'})\n")
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")


def launched(program: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``program`` under groundtrace-run with the integrations installed here, scores to tmp_path's jsonl."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDTRACE_")}
    environ.update(GROUNDTRACE_METRICS="lexical", GROUNDTRACE_SINKS="jsonl",
                   GROUNDTRACE_JSONL_PATH=str(tmp_path / "scores.jsonl"), **env)
    (tmp_path / "app.py").write_text(program)
    return subprocess.run([str(LAUNCHER), sys.executable, "app.py"], cwd=tmp_path, env=environ, capture_output=True,
                          text=True, timeout=180)


@needs_proc
def test_a_process_that_imports_no_framework_loads_no_groundtrace_and_starts_no_process(tmp_path):
    # a server's supervisor, multiprocessing's resource tracker, a reloader: what every process under the launcher pays
    result = launched(CHILDREN + LOADED + "time.sleep(1.0)\nprint(loaded, children())\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] []"
    assert result.stderr == ""


@needs_proc
def test_langchain_is_instrumented_when_the_app_imports_it_and_nothing_starts_before_a_record(tmp_path):
    program = CHILDREN + (
        "import langchain_core\n"
        "import groundtrace_langchain\n"
        "from groundtrace.capture import kit\n"
        "time.sleep(1.0)\n" + LOADED +
        "print(groundtrace_langchain.instrumented_handler() is not None, loaded, kit._shared.workers_alive, "
        "kit._shared._started, children())\n")
    result = launched(program, tmp_path)
    assert result.returncode == 0, result.stderr
    # instrumented, llama_index never imported, the Monitor ready and not started: no scoring process
    assert result.stdout.strip() == "True ['groundtrace', 'groundtrace_langchain', 'langchain_core'] 1 False []"
    assert not (tmp_path / "scores.jsonl").exists()


FAILING_APP = """
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

chain = ({"context": RunnableLambda(lambda q: "Refunds take 14 days."), "question": RunnableLambda(lambda q: q)}
         | ChatPromptTemplate.from_template("Context: {context}\\nQuestion: {question}")
         | FakeListChatModel(responses=["Refunds take 14 days."]))
chain.invoke("How long do refunds take?")  # a record: the scoring process starts
"""


@needs_proc
@pytest.mark.parametrize("how", ["raises", "vanishes"])
def test_a_failing_apps_own_error_is_first_and_alone(tmp_path, how):
    if how == "raises":  # the interpreter's exit: the Monitor settles the record, then the error ends the program
        end = "raise RuntimeError('the app is broken')\n"
    else:  # the process goes while its scoring process is starting: that one must end without a word
        end = CHILDREN + ("import sys, traceback\n"
                          "deadline = time.monotonic() + 60\n"
                          "while not children() and time.monotonic() < deadline:  # the worker starts it\n"
                          "    time.sleep(0.01)\n"
                          "try:\n    raise RuntimeError('the app is broken')\n"
                          "except RuntimeError:\n    traceback.print_exc()\n    sys.stderr.flush()\n    os._exit(1)\n")
    result = launched(FAILING_APP + end, tmp_path)  # returns once every process holding its stderr has ended
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):"), result.stderr
    assert result.stderr.count("Traceback") == 1 and "BrokenPipe" not in result.stderr, result.stderr
    assert result.stderr.endswith("RuntimeError: the app is broken\n"), result.stderr
    if how == "raises":
        (row,) = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
        assert row["record"]["question"] == "How long do refunds take?" and row["scores"][0]["metric"] == "lexical"
