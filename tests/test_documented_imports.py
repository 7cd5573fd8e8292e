"""Every import a user was shown keeps working: each `import` and `from ... import` of groundtrace in the README, the
docs, the notebooks and the integrations' READMEs, and each object the API reference names (`::: path`), imports
and resolves. Internal modules move freely; these paths do not."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a statement that begins a line: `from groundtrace... import (...)` may run over several lines
_STATEMENT = re.compile(r"^[ \t]*(from[ \t]+(groundtrace\w*(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)"
                        r"|import[ \t]+groundtrace\w*(?:\.\w+)*(?:[ \t]+as[ \t]+\w+)?)", re.MULTILINE)
_REFERENCE = re.compile(r"^:::[ \t]+((?:groundtrace\w*)(?:\.\w+)*)", re.MULTILINE)


def _texts() -> list[tuple[str, str]]:
    found = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
             for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
                          *sorted((ROOT / "integrations").glob("*/README.md"))]]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found.append((str(path.relative_to(ROOT)), "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")))
    return found


def documented_imports() -> dict[str, str]:
    """Each distinct import statement of groundtrace shown to users, with where it was first seen."""
    statements: dict[str, str] = {}
    for where, text in _texts():
        for match in _STATEMENT.finditer(text):
            statement = " ".join(match.group(1).split())
            statements.setdefault(statement, where)
    return statements


def documented_references() -> dict[str, str]:
    """Each object the API reference renders (`::: groundtrace.capture.explicit.turn`), with its page."""
    return {match.group(1).rstrip("."): where for where, text in _texts() for match in _REFERENCE.finditer(text)}


def resolve(dotted: str) -> object:
    """The object a dotted path names, as scripts/api_markdown.py finds it for API.md."""
    spec = importlib.util.spec_from_file_location("api_markdown", ROOT / "scripts" / "api_markdown.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.resolve(dotted)


def test_the_collection_sees_the_shown_paths():
    statements = documented_imports()
    assert len(statements) > 40
    for shown in ("from groundtrace.monitor import Monitor", "from groundtrace.io import read_scored",
                  "from groundtrace.evaluators import langsmith_evaluator", "from groundtrace.review.labels import read_labels"):
        assert shown in statements
    assert "groundtrace.evaluators.mlflow_scorer" in documented_references()


def _needs_its_framework(text: str) -> None:
    """An integration's path imports only where its framework is installed (make test installs them all)."""
    for integration, framework in (("groundtrace_langchain", "langchain_core"), ("groundtrace_llamaindex", "llama_index.core"),
                                   ("groundtrace_demo", "groundtrace_demo")):
        if integration in text:
            pytest.importorskip(framework)


@pytest.mark.parametrize("statement", sorted(documented_imports()))
def test_each_documented_import_works(statement):
    _needs_its_framework(statement)
    [node] = ast.parse(statement).body
    if isinstance(node, ast.Import):
        for alias in node.names:
            importlib.import_module(alias.name)
        return
    assert isinstance(node, ast.ImportFrom) and node.module
    module = importlib.import_module(node.module)
    for alias in node.names:
        if not hasattr(module, alias.name):  # a submodule: `from groundtrace.backends import judge`
            importlib.import_module(f"{node.module}.{alias.name}")


@pytest.mark.parametrize("dotted", sorted(documented_references()))
def test_each_object_of_the_api_reference_resolves(dotted):
    _needs_its_framework(dotted)
    assert resolve(dotted) is not None
