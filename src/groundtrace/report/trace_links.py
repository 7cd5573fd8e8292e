"""A link from a record to its trace, from a URL template the user sets once.

``http://localhost:6006/redirects/traces/{trace_id}``: the placeholders are the record's ids,
``{trace_id}``, ``{span_id}``, ``{run_id}``, ``{session_id}`` and ``{id}``, and ``{links.NAME}`` for
an id another system gave the request (``Record.trace_links``, e.g. ``{links.mlflow}``); ``{{`` and
``}}`` are literal braces (a Grafana Explore link is JSON). Records are untrusted, so a template must
be http(s) with no placeholder before the path (a value never chooses the host), and every value is
percent-encoded whole: a link can only point into the server the user named.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from groundtrace.record import Record
from groundtrace.score import ScoredRecord

FIELDS = ("trace_id", "span_id", "run_id", "session_id", "id")
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def check_template(template: str) -> str:
    """``template`` as given, or ValueError saying what is wrong with it."""
    scheme, _, rest = template.partition("://")
    if scheme.lower() not in ("http", "https") or not rest:
        raise ValueError(f"trace URL template {template!r}: it must start with http:// or https://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "{" in authority or "}" in authority or not urlsplit(f"{scheme}://{authority}").hostname:
        raise ValueError(f"trace URL template {template!r}: the host must be written out, placeholders go in the path")
    for match in _TOKEN.finditer(template):
        name = match.group(1)
        if name is not None and name not in FIELDS and not (name.startswith("links.") and len(name) > 6):
            raise ValueError(f"trace URL template {template!r}: unknown placeholder {{{name}}} "
                             f"(known: {', '.join('{' + f + '}' for f in FIELDS)}, {{links.NAME}})")
    if _TOKEN.sub("", template).count("{") or _TOKEN.sub("", template).count("}"):
        raise ValueError(f"trace URL template {template!r}: a lone brace (write {{{{ or }}}} for a literal one)")
    return template


def _value(record: Record, name: str) -> str | None:
    value = record.trace_links.get(name[6:]) if name.startswith("links.") else getattr(record, name)
    return value if isinstance(value, str) and value else None


def trace_link(template: str | None, record: Record | ScoredRecord) -> str | None:
    """The link to ``record``'s trace; None without a template or when the record lacks an id it names."""
    if not template:
        return None
    check_template(template)
    if isinstance(record, ScoredRecord):
        record = record.record
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        if match.group(1) is None:
            return match.group(0)[0]  # {{ or }}
        value = _value(record, match.group(1))
        if value is None:
            missing = True
            return ""
        return quote(value, safe="")

    link = _TOKEN.sub(fill, template)
    return None if missing else link
