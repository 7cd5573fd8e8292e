"""The judge client: structured-output mode detection, retries with backoff, the concurrency
limit, the repair request, the cache and cost accounting around one OpenAI-compatible chat endpoint
(see the package's doc)."""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import BaseModel, Field, ValidationError

from groundtrace._extras import missing_extra
from groundtrace.backends.judge.cache import JudgeCache
from groundtrace.config import JudgeSettings, Settings
from groundtrace.backends.judge.parsing import (
    extract_json,
    looks_like_refusal,
    safe_schema_name,
    strict_schema,
    validation_message,
    with_schema_instruction,
)
from groundtrace.backends.judge.prices import DEFAULT_PRICES, Price, cost_of
from groundtrace.redaction import get_logger, redact, register_secrets
from groundtrace.score import Cost

log = get_logger("groundtrace.backends.judge")

T = TypeVar("T", bound=BaseModel)
Mode = Literal["json_schema", "json_object", "text"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "text")

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


# ----------------------------------------------------------------------------------------- errors


class JudgeError(RuntimeError):
    """Anything that kept the judge from returning a validated answer.

    ``kind`` is one of: config, connection, timeout, rate_limit, server, http, refusal, truncated,
    parse, validation. ``status`` is the HTTP status where there was one.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None) -> None:
        super().__init__(redact(message))  # it quotes the server, which may echo our key
        self.kind = kind
        self.status = status


# ---------------------------------------------------------------------------------------- results


class JudgeResult(BaseModel, Generic[T]):
    """What :meth:`JudgeClient.complete` returns: one validated object per sample.

    ``cost`` counts every request made for this result (repairs included). On a cache hit
    (``cached=True``) nothing was spent now; ``cost`` is what the answer cost when it was computed.
    """

    parsed: list[T]
    raw: list[str]
    cost: Cost
    mode: Mode
    model: str
    cached: bool = False
    latency_ms: float
    requests: int = Field(default=0, description="HTTP requests made, retries and repairs included")

    @property
    def value(self) -> T:
        """The first (with ``n=1``, the only) sample."""
        return self.parsed[0]


# ----------------------------------------------------------------------------------------- client


class _Rejected(Exception):
    """A non-retryable HTTP error, kept apart so that mode detection can fall back on it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Usage:
    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.requests = 0

    def add(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)


class JudgeClient:
    """An OpenAI-compatible chat client that returns validated pydantic objects (see the package doc).

    ``model``, ``base_url``, ``api_key`` and the cache folder default to ``settings`` (a
    :class:`~groundtrace.config.JudgeSettings` or :class:`~groundtrace.config.Settings`; without
    one, the environment's: ``GROUNDTRACE_JUDGE_MODEL`` (else ``gpt-4o-mini``), ``OPENAI_BASE_URL``
    (else OpenAI), ``OPENAI_API_KEY`` (a local server needs none), ``GROUNDTRACE_JUDGE_CACHE_DIR``). ``timeout_s`` bounds each HTTP request; a call gives up after ``max_retries``
    retries, so it takes at most about ``(max_retries + 1) * timeout_s`` plus the backoff
    (``backoff_s * 2**k``, at most ``max_backoff_s``, or what ``Retry-After`` says, at most
    ``max_retry_after_s``). ``concurrency`` requests at most are in flight from this client, across
    all threads. ``mode`` forces one structured-output mode instead of detecting it. ``prices``
    adds to or overrides :data:`DEFAULT_PRICES`. ``cache=False`` (or ``cache_dir=None``) turns
    the disk cache off.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        concurrency: int = 4,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None | Literal["default"] = "default",
        prices: Mapping[str, Price | tuple[float, float]] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        mode: Mode | Literal["auto"] = "auto",
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        max_retry_after_s: float = 30.0,
        settings: JudgeSettings | Settings | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as error:
            raise missing_extra("openai", "the LLM judge", error) from None
        if mode != "auto" and mode not in MODES:
            raise JudgeError(f"unknown structured-output mode {mode!r}: use 'auto' or one of {', '.join(MODES)}", kind="config")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise JudgeError("concurrency must be >= 1, max_retries >= 0 and timeout_s > 0", kind="config")
        self._openai = openai
        judge = judge_settings(settings)
        self.model = model or judge.model or DEFAULT_MODEL
        self.base_url = (base_url or judge.base_url or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or judge.api_key
        register_secrets(key)
        if not key and "api.openai.com" in self.base_url:
            raise JudgeError(
                "no API key for OpenAI: set OPENAI_API_KEY or pass api_key=..., or point OPENAI_BASE_URL "
                "(base_url=...) at a local OpenAI-compatible server",
                kind="config",
            )
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.concurrency = int(concurrency)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.forced_mode: Mode | None = None if mode == "auto" else mode
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES)
        for name, price in (prices or {}).items():
            self.prices[name] = price if isinstance(price, Price) else Price(input=price[0], output=price[1])
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=key or "not-needed",  # a local server needs no key, but the SDK insists on one
            timeout=self.timeout_s,
            max_retries=0,  # retries are ours: we count them and control the backoff
        )
        self._semaphore = threading.BoundedSemaphore(self.concurrency)
        self._modes: dict[tuple[str, str], Mode] = {}
        self._modes_lock = threading.Lock()
        self.cache: JudgeCache | None = None
        if cache and cache_dir is not None:
            directory = judge.cache_dir if cache_dir == "default" else Path(cache_dir)
            try:
                self.cache = JudgeCache(directory)
            except (OSError, sqlite3.Error) as error:
                log.warning("judge cache at %s is unusable (%s); continuing without it", directory, error)

    # -- public -----------------------------------------------------------------------------------

    @property
    def mode(self) -> Mode | None:
        """The structured-output mode in use for this client's (base URL, model), once known."""
        return self.forced_mode or self._modes.get((self.base_url, self.model))

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        schema: type[T],
        *,
        n: int = 1,
        name: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> JudgeResult[T]:
        """Ask the judge and return ``n`` validated ``schema`` objects, or raise :class:`JudgeError`.

        ``n > 1`` asks for several samples (self-consistency; use a temperature above 0); a server
        that returns fewer choices than asked is asked again for the rest.
        """
        started = time.perf_counter()
        if n < 1:
            raise JudgeError(f"n must be at least 1, got {n}", kind="config")
        messages = [dict(m) for m in messages]
        params: dict[str, Any] = {"temperature": self.temperature if temperature is None else float(temperature)}
        if (max_tokens or self.max_tokens) is not None:
            params["max_tokens"] = max_tokens or self.max_tokens
        if seed is not None:
            params["seed"] = seed
        schema_name = safe_schema_name(schema, name)
        json_schema = strict_schema(schema)

        key = None
        if self.cache is not None:
            key = JudgeCache.key(
                {"base_url": self.base_url, "model": self.model, "messages": messages, "params": params, "n": n,
                 "response_format": {"name": schema_name, "schema": json_schema}}
            )
            hit = self._cache_get(key)
            if hit is not None:
                try:
                    parsed = [schema.model_validate(extract_json(raw)) for raw in hit["raw"]]
                except (ValueError, ValidationError):
                    parsed = None  # the schema changed under an identical key; ask again
                if parsed is not None and len(parsed) == n:
                    return JudgeResult[schema](  # type: ignore[valid-type]
                        parsed=parsed, raw=hit["raw"], mode=hit["mode"], model=self.model, cached=True, requests=0,
                        cost=cost_of(self.model, hit["input_tokens"], hit["output_tokens"], self.prices),
                        latency_ms=(time.perf_counter() - started) * 1000,
                    )

        usage = _Usage()
        parsed_all: list[T] = []
        raw_all: list[str] = []
        mode: Mode = self.mode or "json_schema"
        while len(parsed_all) < n:
            want = n - len(parsed_all)
            response, mode = self._create(messages, params, want, schema, schema_name, json_schema, usage)
            choices = list(response.choices or [])[:want]
            if not choices:
                raise JudgeError(f"the judge at {self.base_url} returned no choices; check that it serves chat completions", kind="parse")
            for choice in choices:
                obj, raw = self._read_choice(choice, messages, params, mode, schema, schema_name, json_schema, usage)
                parsed_all.append(obj)
                raw_all.append(raw)

        if key is not None:
            self._cache_put(key, {"raw": raw_all, "mode": mode, "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})
        return JudgeResult[schema](  # type: ignore[valid-type]
            parsed=parsed_all, raw=raw_all, mode=mode, model=self.model, cached=False, requests=usage.requests,
            cost=cost_of(self.model, usage.input_tokens, usage.output_tokens, self.prices),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def acomplete(
        self, messages: Sequence[Mapping[str, Any]], schema: type[T], **kwargs: Any
    ) -> JudgeResult[T]:
        """:meth:`complete` in a worker thread; the concurrency limit still applies."""
        return await asyncio.to_thread(self.complete, messages, schema, **kwargs)

    def close(self) -> None:
        self._client.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- structured output ------------------------------------------------------------------------

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
        schema_name: str, json_schema: dict[str, Any], usage: _Usage,
    ) -> tuple[Any, Mode]:
        known = self.mode
        candidates: tuple[Mode, ...] = (known,) if known else MODES
        for i, mode in enumerate(candidates):
            try:
                response = self._request(self._payload(messages, params, n, mode, schema_name, json_schema), usage)
            except _Rejected as rejected:
                format_problem = rejected.status in (400, 422) or _rejects_response_format(rejected.status, rejected.message) or (
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
        schema: type[T], schema_name: str, json_schema: dict[str, Any], usage: _Usage,
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
                            f"the judge model refused to answer: {_clip(raw)!r}; rephrase the prompt or use another model",
                            kind="refusal",
                        ) from None
                    problem = f"the judge's reply is not valid JSON ({error})"
                    kind = "truncated" if choice.finish_reason == "length" else "parse"
            if attempt == 0:
                repair = [
                    *messages,
                    {"role": "assistant", "content": raw},
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
        raise JudgeError(f"{problem}, even after one repair request ({hint}); reply was: {_clip(raw)!r}", kind=kind)

    # -- transport --------------------------------------------------------------------------------

    def _request(self, payload: dict[str, Any], usage: _Usage) -> Any:
        openai = self._openai
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                with self._semaphore:
                    usage.requests += 1
                    response = self._client.chat.completions.create(**payload)
                if isinstance(response, str):  # the SDK hands back a body that is not JSON as text
                    raise JudgeError(f"the judge at {self.base_url} answered with no chat completion (an event stream or "
                                     f"a proxy's page?); server said: {_body_text(response)}", kind="server")
                usage.add(response)
                return response
            except openai.APIStatusError as error:
                status = error.status_code
                # llama-cpp-python's server answers an unsupported response_format with HTTP 500
                # (its request validation error); retrying cannot help, falling back can
                if not (status == 429 or status >= 500 or status in (408, 409)) or _rejects_response_format(status, _error_text(error)):
                    raise _Rejected(status, _error_text(error)) from None
                if attempt >= self.max_retries:
                    raise self._status_error(status, _error_text(error), retried=attempt) from None
                retry_after = _retry_after(error.response.headers)
                last = f"HTTP {status}"
            except openai.APITimeoutError:
                if attempt >= self.max_retries:
                    raise JudgeError(
                        f"the judge at {self.base_url} did not answer within {self.timeout_s:g} s, {attempt + 1} time(s); "
                        "raise timeout_s, lower concurrency, or check the server's load",
                        kind="timeout",
                    ) from None
                last = "timeout"
            except openai.APIConnectionError as error:
                if attempt >= self.max_retries:
                    raise JudgeError(
                        f"could not connect to the judge at {self.base_url} ({error.__cause__ or error}) after "
                        f"{attempt + 1} attempt(s): is the server running, and is OPENAI_BASE_URL (base_url=) right?",
                        kind="connection",
                    ) from None
                last = "connection error"
            delay = (
                min(retry_after, self.max_retry_after_s)
                if retry_after is not None
                else min(self.backoff_s * 2**attempt, self.max_backoff_s) * random.uniform(0.8, 1.2)
            )
            log.debug("judge request failed (%s); retry %d in %.2f s", last, attempt + 1, delay)
            time.sleep(delay)
            attempt += 1

    def _status_error(self, status: int, message: str, retried: int = 0) -> JudgeError:
        where = f"the judge at {self.base_url} (model {self.model!r})"
        if status == 429:
            return JudgeError(f"{where} is rate limiting (HTTP 429) after {retried} retries: lower concurrency or wait; server said: {message}", kind="rate_limit", status=status)
        if status >= 500:
            return JudgeError(f"{where} failed with HTTP {status} after {retried} retries: the server is failing, try later; server said: {message}", kind="server", status=status)
        hint = {
            401: "check OPENAI_API_KEY (api_key=)",
            403: "the key may not have access to this model",
            404: "check the model name and that the base URL ends with /v1",
        }.get(status, "the request was rejected")
        return JudgeError(f"{where} answered HTTP {status}: {hint}; server said: {message}", kind="http", status=status)

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        try:
            return self.cache.get(key) if self.cache else None
        except (sqlite3.Error, ValueError) as error:
            log.warning("judge cache read failed (%s); asking the judge", error)
            return None

    def _cache_put(self, key: str, value: dict[str, Any]) -> None:
        try:
            if self.cache:
                self.cache.put(key, value)
        except sqlite3.Error as error:
            log.warning("judge cache write failed (%s)", error)


#: the keyword arguments that configure a JudgeClient (the judge metrics pass these on to it)
CLIENT_OPTIONS = frozenset(name for name in inspect.signature(JudgeClient.__init__).parameters if name != "self")

_clients: dict[tuple, JudgeClient] = {}
_clients_lock = threading.Lock()


def judge_settings(settings: JudgeSettings | Settings | None = None) -> JudgeSettings:
    """The judge's settings: given, taken from a Settings, or read from the environment by config."""
    if isinstance(settings, Settings):
        return settings.judge
    return settings if settings is not None else JudgeSettings.from_env()


def shared_client(**options: Any) -> JudgeClient:
    """One JudgeClient per distinct configuration in this process (the judge settings, given as
    ``settings=`` or the environment's, are part of it: a changed OPENAI_BASE_URL gets a new
    client), so that callers with the same settings share the structured-output mode detection,
    the concurrency limit and the cache."""
    options["settings"] = judge_settings(options.get("settings"))
    key = tuple(sorted((k, _hashable(v)) for k, v in options.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = JudgeClient(**options)
        return client


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, Price):
        return (value.input, value.output)
    return value


def _rejects_response_format(status: int, message: str) -> bool:
    """A server error that is really the server refusing our response_format."""
    return status >= 500 and re.search(r"response_format", message, re.IGNORECASE) is not None


def _error_text(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return _clip(str(inner["message"]))
        if isinstance(inner, str):
            return _clip(inner)
    return _clip(getattr(error, "message", None) or str(error))


def _body_text(body: str) -> str:
    """What a body that is no chat completion says: the error of an event stream's ``data:`` line
    where it has one (a server that streams its errors), else the text itself; clipped."""
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[len("data:"):])
        except ValueError:
            continue
        if isinstance(event, Mapping) and event.get("error"):
            error = event["error"]
            return _clip(str(error.get("message") or error) if isinstance(error, Mapping) else str(error))
    return _clip(body.strip())


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if present."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None


def _clip(text: str, limit: int = 300) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "..."

