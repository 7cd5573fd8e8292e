"""The report's Jinja environment: its templates, autoescaped, and the filters they use (the page and its views)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from groundtrace.report.records import mark_class, tooltip

DETAILS_CHARS = 20_000  # a Score's details as JSON, cut there: some metrics keep whole judge replies


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def percent(share: float | None) -> str:
    """A share as a whole percent, a half rounded up, as the page's script rounds (``toFixed(0)``): 3/24 is 13%
    in the summary and in every view alike."""
    if share is None:
        return "—"
    return f"{Decimal(100 * share).quantize(Decimal(1), ROUND_HALF_UP)}%"


def _details_json(details: Mapping[str, Any]) -> str:
    text = json.dumps(details, ensure_ascii=False, indent=1, default=str)
    return text if len(text) <= DETAILS_CHARS else text[:DETAILS_CHARS] + "\n…"


def environment() -> Environment:
    # Autoescape everywhere: questions, answers, contexts, reasons and even metric names and ids
    # are untrusted text.
    env = Environment(loader=PackageLoader("groundtrace", "report"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(number=_number, percent=percent, details_json=_details_json, tooltip=tooltip, mark_class=mark_class)
    return env
