"""The transport to one OpenAI-compatible chat endpoint: each request under the client's concurrency limit,
retried with exponential backoff on 429, 5xx, timeouts and refused connections (honouring ``Retry-After``,
bounded), and every failure turned into a :class:`~groundtrace.backends.judge.results.JudgeError` that says
what to do. A rejection that is no use retrying (a 4xx, or a server refusing our ``response_format``) comes
back as :class:`Rejected`, so that mode detection can fall back on it."""

from __future__ import annotations

import email.utils
import json
import random
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from groundtrace.backends.judge.results import JudgeError, Usage
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.backends.judge")


class Rejected(Exception):
    """A non-retryable HTTP error, kept apart so that mode detection can fall back on it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Transport:
    """The requests of a :class:`~groundtrace.backends.judge.JudgeClient`, which sets these attributes."""

    base_url: str
    model: str
    timeout_s: float
    max_retries: int
    backoff_s: float
    max_backoff_s: float
    max_retry_after_s: float
    _openai: Any  # the openai module, imported when the client is built
    _client: Any  # its OpenAI client, with the SDK's own retries off
    _semaphore: threading.BoundedSemaphore

    def _request(self, payload: dict[str, Any], usage: Usage) -> Any:
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
                if not (status == 429 or status >= 500 or status in (408, 409)) or rejects_response_format(status, _error_text(error)):
                    raise Rejected(status, _error_text(error)) from None
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
            except (ValueError, UnicodeDecodeError) as error:  # a body the SDK could not read (not JSON, not UTF-8)
                raise JudgeError(f"the judge at {self.base_url} answered with a body that is no chat completion "
                                 f"({type(error).__name__}: {clip(str(error), 120)})", kind="parse", fault=True) from None
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


def rejects_response_format(status: int, message: str) -> bool:
    """A server error that is really the server refusing our response_format."""
    return status >= 500 and re.search(r"response_format", message, re.IGNORECASE) is not None


def _error_text(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return clip(str(inner["message"]))
        if isinstance(inner, str):
            return clip(inner)
    return clip(getattr(error, "message", None) or str(error))


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
            return clip(str(error.get("message") or error) if isinstance(error, Mapping) else str(error))
    return clip(body.strip())


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


def clip(text: str, limit: int = 300) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "..."
