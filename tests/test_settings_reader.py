"""config.py is the one reader of groundtrace's settings: no other module of the core or the integrations reads a
GROUNDTRACE_* variable (from os.environ, os.getenv or a mapping of it); setting one for a child process is writing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READER = ROOT / "src" / "groundtrace" / "config.py"


def setting_reads(path: Path, root: Path = ROOT) -> list[str]:
    """Each place ``path`` reads a GROUNDTRACE_* name: env.get("GROUNDTRACE_X"), os.getenv(...), env["GROUNDTRACE_X"]
    (not as an assignment's target), "GROUNDTRACE_X" in env."""
    found = []

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("GROUNDTRACE_")

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args and named(node.args[0]) and \
                isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv", "pop"):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
        elif isinstance(node, ast.Subscript) and named(node.slice) and isinstance(node.ctx, ast.Load):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
        elif isinstance(node, ast.Compare) and named(node.left) and any(isinstance(op, ast.In) for op in node.ops):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def sources() -> list[Path]:
    return [path for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "integrations").glob("*/src/**/*.py")]
            if path != READER]


def test_only_config_reads_groundtrace_settings():
    assert len(sources()) > 150
    assert [place for path in sources() for place in setting_reads(path)] == []


def test_the_walk_sees_each_way_of_reading(tmp_path):
    module = tmp_path / "x.py"
    module.write_text('import os\nenv = dict(os.environ)\nenv["GROUNDTRACE_ENABLED"] = "0"\n'  # a write: fine
                      'a = os.environ.get("GROUNDTRACE_A")\nb = os.getenv("GROUNDTRACE_B")\n'
                      'c = os.environ["GROUNDTRACE_C"]\nd = "GROUNDTRACE_D" in os.environ\n')
    assert setting_reads(module, tmp_path) == ["x.py:4", "x.py:5", "x.py:6", "x.py:7"]
    assert setting_reads(READER)  # config.py reads them (through its helper): the walk sees that too
