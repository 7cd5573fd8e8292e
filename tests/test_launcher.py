"""groundtrace-run: the application runs unchanged, with every installed integration instrumented."""

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
    )
    info = tmp_path / "probe-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[groundtrace.instrumentors]\nprobe = probe_pkg:instrument\n")
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
