"""The core imports no framework: no module under src/groundtrace imports LangChain, LlamaIndex, another
agent framework or an integration package (DESIGN.md, rules of the house). Read from the source with
`ast`, so an import inside a function, or one made with importlib, counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "groundtrace"
# top-level packages the core must not import: the frameworks, and the distributions beside it in integrations/
FORBIDDEN = {
    "langchain", "langchain_core", "langchain_community", "langchain_openai", "langchain_text_splitters",
    "langgraph", "llama_index", "haystack", "dspy", "crewai", "autogen", "semantic_kernel",
    "groundtrace_langchain", "groundtrace_llamaindex", "groundtrace_demo",
}
IMPORTERS = {"import_module", "__import__"}  # importlib.import_module("x"), __import__("x")


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the source: statements, and calls with a literal name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in IMPORTERS:
                found.append((node.lineno, node.args[0].value))
    return found


def framework_imports(root: Path) -> list[str]:
    return [f"{path.relative_to(root.parent)}:{line} imports {module}"
            for path in sorted(root.rglob("*.py"))
            for line, module in imported_modules(path.read_text(encoding="utf-8"))
            if module.split(".")[0] in FORBIDDEN]


def test_nothing_under_src_groundtrace_imports_a_framework_or_an_integration() -> None:
    assert len(list(SRC.rglob("*.py"))) > 40  # the walk found the package
    assert framework_imports(SRC) == []


@pytest.mark.parametrize("line", [
    "import langchain_core.documents",
    "from llama_index.core import VectorStoreIndex",
    "from groundtrace_langchain import GroundtraceCallbackHandler",
    "def run():\n    import groundtrace_demo.runner",
    "importlib.import_module('langgraph.graph')",
])
def test_the_walk_sees_each_kind_of_import(tmp_path: Path, line: str) -> None:
    package = tmp_path / "groundtrace"
    package.mkdir()
    (package / "ok.py").write_text("import json\nfrom groundtrace.score import Score\nfrom . import ok\n")
    (package / "bad.py").write_text(line + "\n")
    assert [found.split(":")[0] for found in framework_imports(package)] == ["groundtrace/bad.py"]
