"""The command-line reference (docs/reference/cli.md) is written at build time by docs/hooks/cli.py: the built page
holds every command `groundtrace --help` lists (entry-point commands such as `demo` included) and every option of
`groundtrace score`, so it cannot fall behind the code."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.snippets import ROOT


def cli_help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", *args, "--help"], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def cli_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    site = tmp_path_factory.mktemp("site")
    # not --strict: tests/docs/test_site.py holds the whole site to that; here only this page matters
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--no-strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")


def test_the_built_page_lists_every_command_of_groundtrace_help(cli_page: str) -> None:
    listed = cli_help().split("Commands", 1)[1]
    commands = re.findall(r"^│ ([a-z][\w-]*)\s{2,}", listed, re.MULTILINE)
    assert {"metrics", "score", "bench", "report", "demo"} <= set(commands), commands
    for command in commands:
        assert f'id="{command}"' in cli_page, command
        assert f"groundtrace {command} [OPTIONS]" in html.unescape(cli_page), command


def test_the_built_page_lists_every_option_of_score(cli_page: str) -> None:
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+|-[a-zA-Z])(?=[\s,│])", cli_help("score")))
    assert {"--metrics", "-m", "--output", "-o", "--from", "--max-flagged", "--sinks"} <= options, options
    section = html.unescape(cli_page).split('id="score"', 1)[1].split('<h2 id="', 1)[0]
    missing = sorted(option for option in options if f"<code>{option}" not in section and f", {option}" not in section)
    assert not missing, missing


def test_the_launcher_help_is_on_the_page(cli_page: str) -> None:
    assert "usage: groundtrace-run" in html.unescape(cli_page)
    assert "--sample-rate" in html.unescape(cli_page)


def test_the_page_keeps_its_markers() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page.count("<!-- groundtrace-cli -->") == 1 and page.count("<!-- groundtrace-run -->") == 1
    assert "hooks:\n  - docs/hooks/cli.py" in Path(ROOT / "mkdocs.yml").read_text(encoding="utf-8")
