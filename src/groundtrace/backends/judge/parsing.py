"""Reading a judge model's reply: the JSON in free text (``<think>`` blocks and code fences stripped,
the first balanced ``{...}``/``[...]`` taken, trailing commas forgiven), refusals, and the JSON
schema in the forms servers and prompts need. Nothing here talks to the network; the repair
request that follows a reply these functions reject is the client's.

Kept as our own code rather than a JSON-repair library (json-repair): those turn any text, a refusal
or prose included, into some JSON value, and the client needs "no JSON here" to ask for a repair
and to tell a refusal from a parse failure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def _outside_strings(text: str, begin: int = 0):
    """(index, character) from ``begin`` on, skipping what lies inside JSON string literals."""
    in_string = escaped = False
    for i in range(begin, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        yield i, c


def _balanced_spans(text: str, limit: int = 16) -> list[str]:
    """Balanced ``{...}``/``[...]`` substrings in order of their start, aware of JSON strings."""
    spans: list[str] = []
    start = 0
    while len(spans) < limit:
        starts = [i for i in (text.find("{", start), text.find("[", start)) if i >= 0]
        if not starts:
            break
        begin = min(starts)
        depth, end = 0, -1
        for i, c in _outside_strings(text, begin):
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end >= 0:
            spans.append(text[begin : end + 1])
        start = begin + 1
    return spans


def _drop_trailing_commas(text: str) -> str:
    """Remove a comma that directly precedes ``}`` or ``]`` (outside strings)."""
    dropped = {i for i, c in _outside_strings(text) if c == "," and text[i + 1 :].lstrip()[:1] in ("}", "]")}
    return "".join(c for i, c in enumerate(text) if i not in dropped)


def _loads(text: str) -> Any:
    # strict=False: raw newlines and tabs inside strings, which llama.cpp's JSON grammar lets a
    # model write, are read as they are instead of failing the whole reply
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:
        return json.loads(_drop_trailing_commas(text), strict=False)


def extract_json(text: str) -> Any:
    """The JSON value in a model's reply: the whole text, else a fenced block, else the first
    balanced ``{...}`` or ``[...]`` that parses; trailing commas are tolerated. Raises ValueError."""
    text = _THINK.sub("", text or "").strip()
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            return _loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            pass
    for candidate in candidates:
        for span in _balanced_spans(candidate):
            try:
                return _loads(span)
            except (json.JSONDecodeError, RecursionError):
                pass
    raise ValueError("no JSON object or array found in the reply" if text else "the reply was empty")


_REFUSAL = re.compile(
    r"^\W*(i['’]?m sorry|i am sorry|sorry,|i apologi[sz]e|i can['’]?t|i cannot|i can not|i['’]?m unable|i am unable|"
    r"i['’]?m not able|i am not able|i won['’]?t|i will not|as an ai)",
    re.IGNORECASE,
)


def looks_like_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(_THINK.sub("", text or "").strip()))


# ---------------------------------------------------------------------------------------- schemas


def strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the form OpenAI's ``strict`` structured outputs accept: every
    object closed (``additionalProperties: false``) with all of its properties required, no defaults."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: walk(v) for k, v in node.items() if k != "default"}
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("properties", {})
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema.model_json_schema())


def safe_schema_name(schema: type[BaseModel], name: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name or schema.__name__)[:64] or "verdict"


def validation_message(schema: type[BaseModel], error: ValidationError) -> str:
    missing = [".".join(str(p) for p in e["loc"]) for e in error.errors() if e["type"] == "missing"]
    other = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in error.errors() if e["type"] != "missing"]
    parts = []
    if missing:
        parts.append("missing field(s) " + ", ".join(repr(m) for m in missing))
    if other:
        parts.append("; ".join(other[:5]))
    return f"the judge's JSON does not match {schema.__name__}: " + "; ".join(parts)


def with_schema_instruction(messages: list[dict[str, Any]], json_schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Text mode: the schema goes into the prompt, appended to the last user message where there is
    one (adding a message could break chat templates that insist on alternating roles)."""
    instruction = (
        "Reply with only a JSON object that matches this JSON schema, with no prose before or after it:\n"
        + json.dumps(json_schema, ensure_ascii=False)
    )
    out = [dict(m) for m in messages]
    if out and out[-1].get("role") == "user" and isinstance(out[-1].get("content"), str):
        out[-1]["content"] = f"{out[-1]['content']}\n\n{instruction}"
    else:
        out.append({"role": "user", "content": instruction})
    return out


__all__ = ["extract_json", "looks_like_refusal", "safe_schema_name", "strict_schema", "validation_message", "with_schema_instruction"]
