"""Structured output: the best form the server accepts, detected once and remembered per client and (base
URL, model): ``json_schema`` (strict), then ``json_object`` with a ``schema`` (what llama.cpp's server
constrains by grammar), then plain text with the schema in the prompt. Whatever the mode, a reply is read
tolerantly and validated against the caller's pydantic model; one that does not parse or validate gets one
repair request before it counts as a failure."""

from __future__ import annotations

import re
import threading
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from groundtrace.backends.judge.parsing import extract_json, looks_like_refusal, validation_message, with_schema_instruction
from groundtrace.backends.judge.results import MODES, JudgeError, Mode, Usage
from groundtrace.backends.judge.transport import Rejected, Transport, clip, log, rejects_response_format

T = TypeVar("T", bound=BaseModel)
#: the most of an unusable reply the repair request sends back (a 10 MB reply is not echoed to the judge)
MAX_ECHO = 4000


class StructuredOutput(Transport):
    """Mode detection and the repair request of a :class:`~groundtrace.backends.judge.JudgeClient`, over its
    transport; ``forced_mode`` (the client's ``mode=``) skips the detection."""

    forced_mode: Mode | None
    _modes: dict[tuple[str, str], Mode]
    _modes_lock: threading.Lock

    @property
    def mode(self) -> Mode | None:
        """The structured-output mode in use for this client's (base URL, model), once known."""
        return self.forced_mode or self._modes.get((self.base_url, self.model))

    def _payload(
        self, messages: list[dict[str, Any]], params: dict[str, Any], n: int, mode: Mode,
        schema_name: str, json_schema: dict[str, Any],
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **params}
        if n > 1:
            payload["n"] = n
        if mode == "json_schema":
            payload["response_format"] = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": json_schema, "strict": True}}
        elif mode == "json_object":
            payload["response_format"] = {"type": "json_object", "schema": json_schema}
        else:
            payload["messages"] = with_schema_instruction(messages, json_schema)
        return payload

    def _create(
        self, messages: list[dict[str, Any]], params: dict[str, Any], n: int, schema: type[BaseModel],
        schema_name: str, json_schema: dict[str, Any], usage: Usage,
    ) -> tuple[Any, Mode]:
        known = self.mode
        candidates: tuple[Mode, ...] = (known,) if known else MODES
        for i, mode in enumerate(candidates):
            try:
                response = self._request(self._payload(messages, params, n, mode, schema_name, json_schema), usage)
            except Rejected as rejected:
                format_problem = rejected.status in (400, 422) or rejects_response_format(rejected.status, rejected.message) or (
                    400 <= rejected.status < 500 and re.search(r"response_format|json_schema|schema", rejected.message, re.IGNORECASE)
                )
                if i + 1 < len(candidates) and format_problem:
                    log.info("judge at %s rejected %s output (%s): trying %s", self.base_url, mode, rejected.status, candidates[i + 1])
                    continue
                raise self._status_error(rejected.status, rejected.message) from None
            if not known:
                with self._modes_lock:
                    self._modes[(self.base_url, self.model)] = mode
            return response, mode
        raise AssertionError("unreachable")

    def _read_choice(
        self, choice: Any, messages: list[dict[str, Any]], params: dict[str, Any], mode: Mode,
        schema: type[T], schema_name: str, json_schema: dict[str, Any], usage: Usage,
    ) -> tuple[T, str]:
        problem = ""
        for attempt in range(2):  # the reply, then one repair
            message = choice.message
            raw = message.content or ""
            refusal = getattr(message, "refusal", None)
            if refusal:
                raise JudgeError(f"the judge model refused to answer: {refusal!r}; rephrase the prompt or use another model", kind="refusal")
            try:
                return schema.model_validate(extract_json(raw)), raw
            except ValueError as error:  # ValidationError is a ValueError too
                if isinstance(error, ValidationError):
                    problem = validation_message(schema, error)
                    kind = "validation"
                else:
                    if looks_like_refusal(raw) or choice.finish_reason == "content_filter":
                        raise JudgeError(
                            f"the judge model refused to answer: {clip(raw)!r}; rephrase the prompt or use another model",
                            kind="refusal",
                        ) from None
                    problem = f"the judge's reply is not valid JSON ({error})"
                    kind = "truncated" if choice.finish_reason == "length" else "parse"
            if attempt == 0:
                repair = [
                    *messages,
                    {"role": "assistant", "content": clip(raw, MAX_ECHO)},  # a flood is not sent back whole
                    {"role": "user", "content": f"That reply could not be used: {problem}. Reply again with only the "
                     f"JSON object that matches the schema: no prose, no code fences."},
                ]
                response, _ = self._create(repair, params, 1, schema, schema_name, json_schema, usage)
                if not response.choices:
                    break
                choice = response.choices[0]
        hint = {
            "validation": "make the prompt name every required field, or use a stronger model",
            "truncated": "the reply was cut off by max_tokens: raise max_tokens",
        }.get(kind, "use a model or server that supports structured output (json_schema), or a stronger model")
        raise JudgeError(f"{problem}, even after one repair request ({hint}); reply was: {clip(raw)!r}", kind=kind)
