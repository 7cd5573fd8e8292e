"""`--version` on both commands: the installed version on stdout, exit 0, like every peer's command line."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from typer.testing import CliRunner

import groundtrace
from groundtrace.cli import app

INSTALLED = version("groundtrace")


def test_the_package_says_the_version_it_was_installed_as() -> None:
    assert groundtrace.__version__ == INSTALLED


def test_groundtrace_version_prints_it_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"groundtrace {INSTALLED}\n"


def test_the_version_is_listed_in_the_help_and_comes_before_any_command() -> None:
    assert "--version" in CliRunner().invoke(app, ["--help"]).stdout
    result = CliRunner().invoke(app, ["--version", "no-such-command"])  # eager: answered before the command is looked up
    assert result.exit_code == 0 and result.stdout == f"groundtrace {INSTALLED}\n"


def test_both_installed_scripts_print_the_version_and_exit_0() -> None:
    bin_dir = Path(sys.executable).parent
    for script in ("groundtrace", "groundtrace-run"):
        done = subprocess.run([str(bin_dir / script), "--version"], capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{script} {INSTALLED}\n", ""), script


def test_after_the_program_version_is_the_program_s_own_argument() -> None:
    # groundtrace-run passes everything after the command on: --version there is the program's
    seen = subprocess.run([sys.executable, "-c", "import sys; from groundtrace.monitor.launcher import main; main(sys.argv[1:])",
                           sys.executable, "-c", "import sys; print(sys.argv[1:])", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.splitlines()[-1] == "['--version']"


def test_version_is_a_plain_flag_and_fit_says_the_metrics_it_combines_by_default():
    """--help shows what the code does: --version takes no value; fit's -m default is the list fit uses."""
    import re

    from groundtrace.cli.fit import DEFAULT_COMPONENTS

    root = " ".join(CliRunner().invoke(app, ["--help"]).output.split())
    assert re.search(r"--version\s+Print the version and exit", root)
    fit = " ".join(CliRunner().invoke(app, ["fit", "--help"]).output.replace("│", " ").split())
    assert f"none: {', '.join(DEFAULT_COMPONENTS)}." in fit
