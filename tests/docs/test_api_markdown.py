"""The plain-Markdown API reference in the repository is what scripts/api_markdown.py writes from the code now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_plain_markdown_reference_is_current():
    pytest.importorskip("groundtrace_langchain")
    pytest.importorskip("groundtrace_llamaindex")
    spec = importlib.util.spec_from_file_location("api_markdown", ROOT / "scripts" / "api_markdown.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.TARGET.read_text(encoding="utf-8")
    assert written == module.render(), "API.md is stale: run python scripts/api_markdown.py"
    assert sum(line.startswith("### `") for line in written.splitlines()) == module.SOURCE.read_text(encoding="utf-8").count("\n::: ")
