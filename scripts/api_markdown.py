"""The Python API reference as plain Markdown, readable in the repository without building the site.

docs/reference/python-api.md names the public objects with mkdocstrings' ``::: dotted.path`` lines (and their
``members`` option); this renders the same objects, in the same order under the same headings, as Markdown:
each one's signature and docstring, and its listed members'. ``tests/docs/test_api_markdown.py`` checks that the
file in the repository is what this writes from the installed code.

    python scripts/api_markdown.py            # writes API.md
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "reference" / "python-api.md"
TARGET = ROOT / "API.md"  # outside docs/: the site has its own page, built from the same directives
_DIRECTIVE = re.compile(r"^::: (\S+)\s*$")
_MEMBERS = re.compile(r"^\s+members:\s*(.+?)\s*$")


def resolve(dotted: str) -> Any:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


def signature(name: str, value: Any) -> str:
    target = value.fget if isinstance(value, property) else value
    try:
        shown = str(inspect.signature(target))
    except (TypeError, ValueError):
        return name
    return name if isinstance(value, property) else f"{name}{shown}"


def block(dotted: str, members: list[str] | None, level: int = 3) -> list[str]:
    value = resolve(dotted)
    name = dotted.rsplit(".", 1)[-1]
    kind = "class" if inspect.isclass(value) else "function"
    lines = [f"{'#' * level} `{dotted}`", "", "```python", f"{kind} {signature(name, value)}" if kind == "class"
             else f"def {signature(name, value)}", "```", ""]
    doc = inspect.getdoc(value)
    if doc:
        lines += [doc, ""]
    for member in members or []:
        attribute = inspect.getattr_static(value, member)
        shown = attribute if isinstance(attribute, property) else getattr(value, member)
        lines += [f"{'#' * (level + 1)} `{name}.{member}`", "", "```python",
                  f"{'property ' if isinstance(attribute, property) else 'def '}{signature(member, shown)}", "```", ""]
        member_doc = inspect.getdoc(attribute.fget if isinstance(attribute, property) else shown)
        if member_doc:
            lines += [member_doc, ""]
    return lines


def render() -> str:
    """The Markdown of every object python-api.md names, under its section headings."""
    out = ["# Python API (plain Markdown)", "",
           "Generated from the installed code by `python scripts/api_markdown.py`, for reading in the repository; the",
           "site's page is [docs/reference/python-api.md](docs/reference/python-api.md). The test suite checks this file",
           "is current.", ""]
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            out += [line, ""]
        elif (found := _DIRECTIVE.match(line)) is not None:
            members: list[str] | None = None
            j = i + 1
            while j < len(lines) and lines[j].startswith("    "):
                if (listed := _MEMBERS.match(lines[j])) is not None:
                    text = listed.group(1)
                    members = [] if text == "false" else [m.strip() for m in text.strip("[]").split(",") if m.strip()]
                j += 1
            out += block(found.group(1), members)
            i = j
            continue
        i += 1
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
