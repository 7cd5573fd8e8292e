"""The architecture page's table says what the import rules say: each part's "may import" column is its set in
tests/test_import_rules.py (the rules the suite enforces), so the page cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_rules import BOTTOM, MAY_IMPORT

PAGE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "architecture.md"


def page_rules() -> dict[str, set[str]]:
    rules = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`") or "," in cells[0]:
            continue
        part = cells[0].strip("`").rstrip("/")
        allowed = cells[2]
        rules[part] = set() if allowed == "nothing" else set(re.findall(r"[\w.]+", allowed.replace("`", "")))
    return rules


def test_each_part_of_the_table_may_import_what_the_rules_allow():
    rules = page_rules()
    assert len(rules) >= 18
    for part, allowed in rules.items():
        if part == "cli":
            continue  # every part but testing: the rules leave the top floor free
        assert part in MAY_IMPORT, part
        assert allowed | {part.removesuffix(".py")} | BOTTOM == MAY_IMPORT[part] | {part.removesuffix(".py")}, part


def test_every_ruled_part_is_on_the_page():
    rules = page_rules()
    listed = set(rules) | {"record.py", "score.py", "config.py", "trace_context.py", "_extras.py", "redaction.py",
                           "errors.py"}
    assert set(MAY_IMPORT) <= listed, set(MAY_IMPORT) - listed
