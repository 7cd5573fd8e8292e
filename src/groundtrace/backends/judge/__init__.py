"""The LLM-judge backend: one small client for any OpenAI-compatible chat endpoint (OpenAI, Azure
OpenAI's v1 API, vLLM, llama.cpp server, Ollama) that returns validated pydantic objects.

    client = JudgeClient()                      # model, key, URL from arguments or the environment
    result = client.complete(messages, Verdict) # result.parsed[0] is a Verdict, or JudgeError

What it does for the caller:

- Structured output in the best form the server accepts, detected once and remembered per client
  and (base URL, model): ``json_schema`` (strict), then ``json_object`` with a ``schema`` (what
  llama.cpp's server constrains by grammar), then plain text. Whatever the mode, the reply is read
  tolerantly (``<think>`` blocks and code fences stripped, the first balanced ``{...}``/``[...]``
  taken, trailing commas forgiven) and validated against the caller's pydantic model; a reply that
  does not parse or validate gets one repair request before it counts as a failure.
- Retries with exponential backoff on 429, 5xx, timeouts and refused connections, honouring
  ``Retry-After`` (bounded); a per-request timeout; a concurrency limit shared by all threads.
- An sqlite cache on disk keyed by (base URL, model, messages, params, requested schema).
- Token and cost accounting from the server's ``usage`` and a price table.
- Every failure the caller sees is one exception type, :class:`JudgeError`, whose message says what
  went wrong and what to do; a result never holds NaN or a half-parsed object.

The modules: :mod:`.client` (JudgeClient: the cache and cost around a call; shared_client),
:mod:`.structured` (structured-output mode detection and the repair request), :mod:`.transport`
(requests, retries and backoff, the errors they end in), :mod:`.results` (JudgeResult, JudgeError,
the modes), :mod:`.parsing` (JSON from free text, refusals, schemas), :mod:`.cache` (the sqlite
cache), :mod:`.prices` (the price table). Importing this package does not import ``openai``;
building a client does.

Settings: ``JudgeClient(settings=...)`` takes a :class:`groundtrace.config.JudgeSettings` (or a
``Settings``); without one, ``groundtrace.config`` reads the environment: ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``GROUNDTRACE_JUDGE_MODEL`` (default ``gpt-4o-mini``),
``GROUNDTRACE_JUDGE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/groundtrace/judge`` or
``~/.cache/groundtrace/judge``). Explicit keyword arguments win over both.
"""

from groundtrace.backends.judge.cache import JudgeCache, default_cache_dir
from groundtrace.backends.judge.client import (
    CLIENT_OPTIONS,
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    MODES,
    JudgeClient,
    JudgeError,
    JudgeResult,
    Mode,
    no_endpoint,
    shared_client,
)
from groundtrace.backends.judge.parsing import extract_json, looks_like_refusal, strict_schema
from groundtrace.backends.judge.prices import DEFAULT_PRICES, PRICES_DATE, Price, cost_of, price_of

__all__ = [
    "CLIENT_OPTIONS",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_PRICES",
    "MODES",
    "PRICES_DATE",
    "JudgeCache",
    "JudgeClient",
    "JudgeError",
    "JudgeResult",
    "Mode",
    "Price",
    "cost_of",
    "default_cache_dir",
    "extract_json",
    "looks_like_refusal",
    "price_of",
    "no_endpoint",
    "shared_client",
    "strict_schema",
]
