"""The judge client: the cache and cost accounting around one OpenAI-compatible chat endpoint, with the
structured-output mode detection and repair of :mod:`.structured` over the retries of :mod:`.transport`
(see the package's doc)."""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import ValidationError

from groundtrace._extras import missing_extra
from groundtrace.backends.breaker import CircuitBreaker, CircuitOpen
from groundtrace.backends.judge.cache import JudgeCache
from groundtrace.backends.judge.parsing import extract_json, safe_schema_name, strict_schema
from groundtrace.backends.judge.prices import DEFAULT_PRICES, Price, cost_of
from groundtrace.backends.judge.results import MODES, JudgeError, JudgeResult, Mode, T, Usage
from groundtrace.backends.judge.structured import StructuredOutput
from groundtrace.backends.judge.transport import log
from groundtrace.config import JudgeSettings, Settings
from groundtrace.redaction import register_secrets

__all__ = ["CLIENT_OPTIONS", "DEFAULT_BASE_URL", "DEFAULT_MODEL", "MODES", "JudgeClient", "JudgeError", "JudgeResult",
           "Mode", "judge_settings", "no_endpoint", "shared_client"]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class JudgeClient(StructuredOutput):
    """An OpenAI-compatible chat client that returns validated pydantic objects (see the package doc).

    ``model``, ``base_url``, ``api_key`` and the cache folder default to ``settings`` (a
    :class:`~groundtrace.config.JudgeSettings` or :class:`~groundtrace.config.Settings`; without
    one, the environment's: ``GROUNDTRACE_JUDGE_MODEL`` (else ``gpt-4o-mini``), ``OPENAI_BASE_URL``
    (else OpenAI), ``OPENAI_API_KEY`` (a local server needs none), ``GROUNDTRACE_JUDGE_CACHE_DIR``). ``timeout_s`` bounds each HTTP request; a call gives up after ``max_retries``
    retries, so it takes at most about ``(max_retries + 1) * timeout_s`` plus the backoff
    (``backoff_s * 2**k``, at most ``max_backoff_s``, or what ``Retry-After`` says, at most
    ``max_retry_after_s``). After ``breaker_failures`` calls in a row fail because of the judge (down, slow,
    failing, unreadable), its calls are refused at once (``JudgeError`` of kind ``unavailable``) for
    ``breaker_backoff_s``, doubling while it keeps failing, then one call tries it again (the circuit breaker:
    groundtrace.backends.breaker). ``concurrency`` requests at most are in flight from this client, across
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
        breaker_failures: int = 5,
        breaker_backoff_s: float = 30.0,
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
        missing = no_endpoint(base_url, api_key, judge)
        if missing:
            raise JudgeError(f"no API key for OpenAI: {missing}, or pass api_key= or base_url=", kind="config")
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
        # a judge that hangs or fails: after breaker_failures failures in a row its calls are refused at once for
        # breaker_backoff_s (doubling while it keeps failing), then one call tries it again
        self.breaker = CircuitBreaker(f"the judge at {self.base_url} (model {self.model!r})", failures=breaker_failures,
                                      backoff_s=breaker_backoff_s)
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
        chat = [dict(m) for m in messages]
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
                {"base_url": self.base_url, "model": self.model, "messages": chat, "params": params, "n": n,
                 "response_format": {"name": schema_name, "schema": json_schema}}
            )
            hit = self._cache_get(key)
            if hit is not None:
                try:
                    parsed = [schema.model_validate(extract_json(raw)) for raw in hit["raw"]]
                except (ValueError, ValidationError):
                    parsed = None  # the schema changed under an identical key; ask again
                if parsed is not None and len(parsed) == n:
                    return JudgeResult[schema](  # type: ignore[valid-type]  # parametrized at run time with the caller's schema
                        parsed=parsed, raw=hit["raw"], mode=hit["mode"], model=self.model, cached=True, requests=0,
                        cost=cost_of(self.model, hit["input_tokens"], hit["output_tokens"], self.prices),
                        latency_ms=(time.perf_counter() - started) * 1000,
                    )

        usage = Usage()
        parsed_all: list[T] = []
        raw_all: list[str] = []
        mode: Mode = self.mode or "json_schema"
        try:
            self.breaker.before()
        except CircuitOpen as refused:
            raise JudgeError(str(refused), kind="unavailable", fault=False) from None
        try:
            while len(parsed_all) < n:
                want = n - len(parsed_all)
                response, mode = self._create(chat, params, want, schema, schema_name, json_schema, usage)
                choices = list(response.choices or [])[:want]
                if not choices:
                    raise JudgeError(f"the judge at {self.base_url} returned no choices; check that it serves chat "
                                     "completions", kind="parse", fault=True)
                for choice in choices:
                    obj, raw = self._read_choice(choice, chat, params, mode, schema, schema_name, json_schema, usage)
                    parsed_all.append(obj)
                    raw_all.append(raw)
        except JudgeError as error:
            if error.fault:
                self.breaker.failed(f"{error.kind}" + (f", HTTP {error.status}" if error.status else ""))
            else:  # it answered: a refusal or an unusable reply to this request says nothing of the next
                self.breaker.succeeded()
            raise
        except BaseException as error:  # never leave a probe out: the breaker would refuse every call from then on
            self.breaker.failed(type(error).__name__)
            raise
        self.breaker.succeeded()

        if key is not None:
            self._cache_put(key, {"raw": raw_all, "mode": mode, "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})
        return JudgeResult[schema](  # type: ignore[valid-type]  # parametrized at run time with the caller's schema
            parsed=parsed_all, raw=raw_all, mode=mode, model=self.model, cached=False, requests=usage.requests,
            cost=cost_of(self.model, usage.input_tokens, usage.output_tokens, self.prices),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def acomplete(
        self, messages: Sequence[Mapping[str, Any]], schema: type[T], **kwargs: Any
    ) -> JudgeResult[T]:
        """:meth:`complete` (``kwargs`` are its keywords) in a worker thread; the concurrency limit still applies."""
        return await asyncio.to_thread(partial(self.complete, messages, schema, **kwargs))

    def close(self) -> None:
        self._client.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the cache --------------------------------------------------------------------------------

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


def no_endpoint(base_url: str | None = None, api_key: str | None = None,
                settings: JudgeSettings | Settings | None = None) -> str | None:
    """What to set when no judge can be called with these options and settings, None when one can: the one
    place that decides whether a judge is configured. OpenAI's endpoint (the default) needs a key; any other
    OpenAI-compatible server (a local llama.cpp) needs none, so OPENAI_BASE_URL alone is enough."""
    judge = judge_settings(settings)
    if api_key or judge.api_key or "api.openai.com" not in (base_url or judge.base_url or DEFAULT_BASE_URL):
        return None
    return ("set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server, e.g. a local "
            "llama.cpp)")


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
