"""Prompt files: ``groundtrace/metrics/prompts/NAME.txt``, a system part and a user part.

    === system ===
    ${rules}
    You check ...
    === user ===
    ${contexts}
    ...

Placeholders are ``string.Template`` ones. Data (the texts being evaluated) is always fenced by
:class:`~groundtrace.metrics.judged.fence.Fence`; parameters (a count, a language name, a
criterion set by the user) go in as they are. ``${rules}`` is ``_rules.txt``: the data-fence and
output rules that every judge prompt shares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from groundtrace.metrics.judged.fence import Fence

_PART = re.compile(r"^=== (system|user) ===[ \t]*$", re.MULTILINE)
_LEFTOVER = re.compile(r"\$\{?[A-Za-z_]\w*\}?")

LANGUAGE_NAMES = {
    "en": "English", "ru": "Russian (русский)", "zh": "Chinese (中文)", "de": "German", "fr": "French",
    "es": "Spanish", "it": "Italian", "pt": "Portuguese", "ja": "Japanese", "ko": "Korean",
}


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code or "English")


@cache
def load(name: str) -> tuple[str, str]:
    """(system, user) templates of prompt ``name``."""
    path = resources.files("groundtrace.metrics") / "prompts" / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"judge prompt {name!r} is missing: expected {path}") from None
    parts = _PART.split(text)
    sections = dict(zip(parts[1::2], (p.strip() for p in parts[2::2]), strict=True))
    if set(sections) != {"system", "user"}:
        raise ValueError(f"judge prompt {path} needs one '=== system ===' and one '=== user ===' section")
    return sections["system"], sections["user"]


def render(
    name: str,
    data: Mapping[str, str | Sequence[str] | None],
    *,
    language: str = "en",
    params: Mapping[str, Any] | None = None,
) -> list[dict[str, str]]:
    """Chat messages for prompt ``name``: each ``data`` value fenced as a block named by its key
    (None: no block, for an optional text that is absent, such as a record's question)."""
    system, user = load(name)
    texts = [v if isinstance(v, str) else "\n".join(v) for v in data.values() if v is not None]
    fence = Fence(texts)
    values: dict[str, Any] = {"language": language_name(language), "code": fence.code, **(params or {})}
    values["rules"] = Template(load_rules()).safe_substitute(values)
    markers = {key: "" if value is None else f"\x00{key}\x00" for key, value in data.items()}
    messages = []
    for role, template in (("system", system), ("user", user)):
        leftover = _LEFTOVER.findall(Template(template).safe_substitute({k: "" for k in [*values, *markers]}))
        content = Template(template).safe_substitute({**values, **markers})
        if leftover:
            raise ValueError(f"judge prompt {name!r} has placeholders nobody fills: {', '.join(sorted(set(leftover)))}")
        # blank lines left by absent blocks are squeezed before the data goes in, never inside it
        content = re.sub(r"\n{3,}", "\n\n", content).strip()
        for key, value in data.items():
            if value is not None:
                content = content.replace(f"\x00{key}\x00", fence.block(key, value))
        messages.append({"role": role, "content": content})
    return messages


@cache
def load_rules() -> str:
    path = resources.files("groundtrace.metrics") / "prompts" / "_rules.txt"
    return path.read_text(encoding="utf-8").strip()
