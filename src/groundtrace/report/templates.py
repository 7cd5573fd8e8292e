"""The report's Jinja environment: its templates, autoescaped, and the filters they use (the page and its views)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from groundtrace.report.records import mark_class, tooltip

DETAILS_CHARS = 20_000  # a Score's details as JSON, cut there: some metrics keep whole judge replies


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _details_json(details: Mapping[str, Any]) -> str:
    text = json.dumps(details, ensure_ascii=False, indent=1, default=str)
    return text if len(text) <= DETAILS_CHARS else text[:DETAILS_CHARS] + "\n…"


def environment() -> Environment:
    # Autoescape everywhere: questions, answers, contexts, reasons and even metric names and ids
    # are untrusted text.
    env = Environment(loader=PackageLoader("groundtrace", "report"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(number=_number, details_json=_details_json, tooltip=tooltip, mark_class=mark_class)
    return env
