"""Langfuse sink: one score per Score on the request's trace (``record.trace_id``) and, when set,
its root observation (``record.span_id``): Langfuse v3+ names traces and observations by their
OpenTelemetry ids. Where Langfuse's own LangChain callback traced the request, the adapter names its
trace and root observation in the ``langfuse`` trace link, and the scores go there.

Langfuse reads a number as higher-is-better, so a Score with a verdict is sent as ``dataType BOOLEAN``
(1: grounded, 0: hallucinated; Langfuse shows True / False), one without as ``NUMERIC`` turned
higher-is-better; the comment says the label, the rounded value, the threshold, the direction and the
unsupported phrases (``sinks.readable``), and the metadata keeps the exact value. An error Score is sent as
``dataType CATEGORICAL``, value 'error', with the error as comment (never NaN, never a made-up
number). Label, direction, threshold and the unsupported spans go in the score's metadata.

The conversation of the turn (``record.session_id``) goes in the metadata as ``session_id``, not in the
score's ``sessionId``: a score names ONE target (a trace, an observation, a session or a dataset run),
and ``sessionId`` makes it a session-level score, a verdict on the whole conversation. Ours judge one
turn, so they stay on its trace, which Langfuse already files under its session by the trace's own
``sessionId`` (set by the traced application).

Why not ``Langfuse().create_score()``: its background consumer only logs a failed delivery, so
the Monitor could neither count it nor bound it in time, and building a ``Langfuse`` client has
process-wide side effects (it registers a global OpenTelemetry tracer provider when none is set,
and clients are singletons per public key). The sink therefore sends each record's scores in one
synchronous ``POST /api/public/scores`` through the SDK's REST client, the endpoint and body
``create_score`` would have queued, with a timeout and bounded retries. Each score carries an id
and a timestamp fixed before the first try, so a retry after a lost answer updates the score
instead of duplicating it.

Settings: ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_BASE_URL`` or
``LANGFUSE_HOST``, ``LANGFUSE_TRACING_ENVIRONMENT``; constructor arguments override them, or pass a
ready ``langfuse.Langfuse`` (its REST client is used) or ``langfuse.api.LangfuseAPI``.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.redaction import get_logger, register_secrets
from groundtrace.score import Score
from groundtrace.sinks import Sink, retry_with_backoff, score_label, spans_summary
from groundtrace.sinks.readable import higher_reads_better, passed, rationale

log = get_logger("groundtrace.sinks.langfuse")

DEFAULT_HOST = "https://cloud.langfuse.com"
#: the trace link an adapter sets when Langfuse's own callback traced the request: "trace id/observation id"
LINK = "langfuse"


def score_fields(score: Score, session_id: str | None = None) -> dict[str, Any]:
    """name, value, data_type, comment and metadata of one score (the SDK's field names);
    ``session_id``: the conversation of the turn, kept in the metadata."""
    metadata: dict[str, Any] = {
        "label": score_label(score),
        "higher_is_better": score.higher_is_better,
        "hallucinated": score.hallucinated,
        "threshold": score.threshold,
        "unsupported_spans": spans_summary(score),
        "record_id": score.record_id,
        "session_id": session_id,
    }
    metadata["value"] = score.value  # the metric's own value; the score's is the verdict
    fields: dict[str, Any] = {"name": score.metric, "metadata": {k: v for k, v in metadata.items() if v is not None}}
    if score.ok and (verdict := passed(score)) is not None:  # Langfuse reads a number as higher-is-better
        fields.update(value=1.0 if verdict else 0.0, data_type="BOOLEAN", comment=rationale(score))
    elif score.ok:
        fields.update(value=higher_reads_better(score), data_type="NUMERIC", comment=rationale(score))
    else:
        fields.update(value="error", data_type="CATEGORICAL", comment=score.error or "the metric returned no value")
    return fields


def langfuse_target(record: Record) -> tuple[str | None, str | None]:
    """(trace id, observation id) of the record in Langfuse: the observation Langfuse's own LangChain
    callback made for the request (the ``langfuse`` trace link), else the record's OpenTelemetry span."""
    link = record.trace_links.get(LINK)
    if link and "/" in link:
        trace_id, _, observation_id = link.partition("/")
        return trace_id, observation_id or None
    return record.trace_id, record.span_id


def base_url(host: str | None) -> str:
    """Where Langfuse is: ``host``, else LANGFUSE_BASE_URL or LANGFUSE_HOST (the SDK's variables), else
    Langfuse Cloud."""
    return (host or os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST") or DEFAULT_HOST).rstrip("/")


def build_api(public_key: str | None, secret_key: str | None, host: str | None, timeout_s: float, what: str) -> Any:
    """The SDK's REST client (``langfuse.api.LangfuseAPI``) for one project's keys, from the arguments
    or the SDK's variables (LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY); ``what`` names the caller in errors."""
    from importlib.metadata import version

    from langfuse.api import LangfuseAPI

    public_key = public_key or os.environ.get("LANGFUSE_PUBLIC_KEY")
    secret_key = secret_key or os.environ.get("LANGFUSE_SECRET_KEY")
    register_secrets(public_key, secret_key)
    if not public_key or not secret_key:
        raise ValueError(f"{what} needs a public and a secret key: set LANGFUSE_PUBLIC_KEY and "
                         "LANGFUSE_SECRET_KEY, or pass public_key= and secret_key=")
    return LangfuseAPI(base_url=base_url(host), username=public_key, password=secret_key,
                       x_langfuse_sdk_name="python", x_langfuse_sdk_version=version("langfuse"),
                       x_langfuse_public_key=public_key, timeout=timeout_s)


def _retryable(error: Exception, httpx: Any, api_error: type[Exception]) -> bool:
    # the SDK's own score consumer retries the same: transport errors, 429 and 5xx
    if isinstance(error, httpx.TransportError):
        return True
    if isinstance(error, api_error):
        status = getattr(error, "status_code", None)
        return status is None or status == 429 or status >= 500
    return False


class LangfuseSink(Sink):
    """``timeout_s`` bounds each HTTP request; ``max_attempts`` bounds the tries of one record
    (429, 5xx and transport errors retried), ``backoff_s`` doubling between them. Nothing is
    buffered, so ``flush()`` has nothing to do."""

    name = "langfuse"
    out_of_process = True  # configured from the Settings and its SDK's variables; sends synchronously

    def __init__(
        self,
        client: Any = None,
        *,
        public_key: str | None = None,
        secret_key: str | None = None,
        host: str | None = None,
        environment: str | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        try:
            import httpx
            from langfuse.api import LangfuseAPI
            from langfuse.api.core import ApiError
            from langfuse.api.scores.types.create_score_batch_results import CreateScoreBatchResults
            from langfuse.api.scores.types.create_score_request import CreateScoreRequest
        except ImportError as error:
            raise missing_extra("langfuse", "the Langfuse sink", error) from None
        self._httpx, self._api_error = httpx, ApiError
        self._request_type, self._partial_type = CreateScoreRequest, CreateScoreBatchResults
        if client is None:
            client = build_api(public_key, secret_key, host, timeout_s, "the Langfuse sink")
        self.api = client if isinstance(client, LangfuseAPI) else client.api
        self.environment = environment or os.environ.get("LANGFUSE_TRACING_ENVIRONMENT") or None
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s

    def emit(self, record: Record, scores: list[Score]) -> None:
        trace_id, observation_id = langfuse_target(record)
        if not trace_id:
            log.debug("record %s has no trace id: no Langfuse score sent", record.id)
            return
        if not scores:
            return
        now = dt.datetime.now(dt.timezone.utc)
        target = {"trace_id": trace_id, "observation_id": observation_id, "environment": self.environment}
        batch = [
            self._request_type(id=uuid.uuid4().hex, timestamp=now,
                               **{k: v for k, v in {**target, **score_fields(score, record.session_id)}.items() if v is not None})
            for score in scores
        ]
        response = self._send(batch, trace_id)
        if isinstance(response, self._partial_type) and response.rejected:
            reasons = "; ".join(error.message for error in response.errors)
            raise RuntimeError(f"Langfuse rejected {response.rejected} of {len(batch)} scores of trace {trace_id}: "
                               f"{reasons}")

    def _send(self, batch: list[Any], trace_id: str) -> Any:
        options = {"timeout_in_seconds": self.timeout_s, "max_retries": 0}  # one retry loop: ours
        try:
            return retry_with_backoff(
                lambda: self.api.scores.create(request=batch, request_options=options),
                attempts=self.max_attempts, backoff_s=self.backoff_s,
                retryable=lambda error: _retryable(error, self._httpx, self._api_error),
            )
        except Exception as error:
            raise RuntimeError(f"Langfuse scores of trace {trace_id} failed: {_describe(error)}") from error


def _describe(error: Exception) -> str:
    status = getattr(error, "status_code", None)
    return f"{type(error).__name__}" + (f" (HTTP {status})" if status else f": {error}")
