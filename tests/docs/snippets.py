"""How the docs site's code runs in the suite (Sybil parses the pages; tests/docs/test_snippets.py runs them).

Every fenced block of a page under docs/ is one of:
- ```python: executed in order, in one namespace per page (Sybil's Python evaluator);
- ```bash: executed by bash (-e -o pipefail) in the page's working folder; it must exit 0;
- a file the reader saves: ```json title="answers.jsonl"``` (also jsonl, csv, yaml, toml, text): written into the
  page's working folder under that name (and parsed, for json/jsonl/yaml/toml), so later blocks can use it;
- ```json / ```yaml without a title: parsed, so it is valid;
- ```text: what a command prints, shown, not run.
Anything else fails tests/docs/test_snippets.py::test_every_fence_is_known, so no snippet escapes the suite.
`<!-- invisible-code-block: python -->` blocks (Sybil's) run too, unseen: set-up a page needs (a loopback server,
a file) and assertions on what the visible code printed or wrote.

Each page runs in a fresh folder holding `groundtrace`, a link to this checkout (the install page's
`pip install -e ./groundtrace` refers to it; pip runs there with PIP_DRY_RUN=1, so the suite's environment is
left as it is), with no GROUNDTRACE_* or OPENAI_* variable set, HF_HUB_OFFLINE=1 and NO_COLOR=1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from sybil import Example, Lexeme, Region, Sybil
from sybil.parsers.markdown import PythonCodeBlockParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BASH_TIMEOUT_S = 600

#: info strings of blocks that are shown and never run (outputs)
SHOWN = {"text"}
#: data formats: saved when titled, parsed either way
DATA = {"json", "jsonl", "csv", "yaml", "toml", "text"}
INFO = re.compile(r'(?P<language>[\w-]+)(?: title="(?P<title>[^"]+)")?[ \t]*$\n', re.MULTILINE)


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def page_id(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def fences(page: Path) -> list[tuple[int, str]]:
    """(line, info string) of every fenced block on the page."""
    text = page.read_text(encoding="utf-8")
    lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))
    return [(text.count("\n", 0, region.start) + 1, region.lexemes["info"].strip())
            for region in lexer(_Doc(text, page))]


def snippet_environment(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDTRACE_", "OPENAI_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1", NO_COLOR="1",
               COLUMNS="100", PIP_DRY_RUN="1", PIP_NO_BUILD_ISOLATION="0", PYTHONUNBUFFERED="1")
    return env


def run_bash(example: Example) -> str | None:
    source = str(example.parsed)
    env = example.namespace["__snippet_env__"]
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", source], cwd=os.getcwd(), env=env,
                          capture_output=True, text=True, timeout=BASH_TIMEOUT_S, stdin=subprocess.DEVNULL)
    example.namespace.setdefault("__bash_outputs__", []).append(done.stdout + done.stderr)
    if done.returncode != 0:
        return (f"bash exited {done.returncode}:\n{source}\n--- stdout ---\n{done.stdout[-4000:]}"
                f"\n--- stderr ---\n{done.stderr[-4000:]}")
    return None


def check_data(example: Example) -> str | None:
    language, title, source = example.region.lexemes["language"], example.region.lexemes.get("title"), str(example.parsed)
    try:
        if language == "json":
            json.loads(source)
        elif language == "jsonl":
            for line in source.splitlines():
                if line.strip():
                    json.loads(line)
        elif language == "yaml":
            yaml.safe_load(source)
        elif language == "toml":
            import tomllib

            tomllib.loads(source)
    except ValueError as error:  # json and toml errors are ValueErrors
        return f"the {language} block does not parse: {error}"
    except yaml.YAMLError as error:
        return f"the yaml block does not parse: {error}"
    if title:
        Path(title).parent.mkdir(parents=True, exist_ok=True)
        Path(title).write_text(source, encoding="utf-8")
    return None


class DataBlockParser:
    """Blocks in a data format (titled: a file to save) and ```bash blocks, with their info strings read whole."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(info_pattern=INFO)

    def __call__(self, document) -> list[Region]:
        regions = []
        for region in self.lexer(document):
            language = region.lexemes["language"]
            if language == "bash" and not region.lexemes.get("title"):
                region.evaluator = run_bash
            elif language in DATA and (language not in SHOWN or region.lexemes.get("title")):
                region.evaluator = check_data
            else:
                continue
            source = region.lexemes["source"]
            region.parsed = source if isinstance(source, Lexeme) else Lexeme(source, 0, 0)
            regions.append(region)
        return regions


def sybil() -> Sybil:
    return Sybil(parsers=[PythonCodeBlockParser(), DataBlockParser()], path=str(DOCS), pattern="*.md")


class _Doc:
    """The little of sybil.Document that a lexer reads."""

    def __init__(self, text: str, path: Path) -> None:
        self.text, self.path = text, str(path)


PYTHON = sys.executable
