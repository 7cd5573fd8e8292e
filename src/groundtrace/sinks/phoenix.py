"""Phoenix sink: one span annotation per Score on the request's root span (``record.span_id``).

Each annotation: name = metric, annotator_kind LLM for the judge metrics and CODE for the offline ones,
identifier ``groundtrace``, result = {label, score, explanation}, the explanation in words: the verdict, the
rounded value, the threshold, the direction and the unsupported phrases (``sinks.readable``), then the reason;
direction, verdict, threshold and the unsupported spans go in its metadata. An error Score is
annotated with label 'error', no score, and the error as explanation. The conversation of the turn
goes in the metadata as ``session_id`` (an annotation has no field for it; Phoenix's sessions come
from the spans' own ``session.id``, which the traced application sets). All Scores of a record
travel in one request, made with ``sync=True`` so that Phoenix says whether it found the span.

Phoenix answers 404 until the span has been ingested (the application's exporter sends spans
in batches), so a 404 is retried with backoff, a bounded number of times, as are transport errors.

Settings: the phoenix client's own environment (``PHOENIX_ENDPOINT``, ``PHOENIX_COLLECTOR_ENDPOINT``
with any ``/v1/traces`` stripped, ``PHOENIX_API_KEY``, ``PHOENIX_CLIENT_HEADERS``); constructor
arguments override them, or pass a ready ``phoenix.client.Client``. Only the light
``arize-phoenix-client`` distribution is needed, not the Phoenix server.
"""

from __future__ import annotations

from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.redaction import get_logger, register_secrets
from groundtrace.score import Score
from groundtrace.sinks import Sink, retry_with_backoff, score_label, spans_summary
from groundtrace.sinks.phoenix_configs import PROJECT_LINK, AnnotationConfigs, traced_project
from groundtrace.sinks.readable import rationale
from groundtrace.sinks.results import annotator_kind

log = get_logger("groundtrace.sinks.phoenix")

#: who annotated, in Phoenix's terms: one annotation per (span, name, identifier), so scoring again updates it
IDENTIFIER = "groundtrace"


def phoenix_client(base_url: str | None = None, api_key: str | None = None, timeout_s: float = 10.0) -> Any:
    """A ``phoenix.client.Client`` from the client's environment (``base_url``/``api_key``
    override it), over our own httpx client so that every request is bounded by ``timeout_s``
    (the phoenix client's default waits up to 30 s per read). The Phoenix source builds its client
    here too, so both reach the same Phoenix the same way."""
    import httpx
    from phoenix.client import Client
    from phoenix.client.utils.config import get_base_url, get_env_client_headers

    headers = get_env_client_headers()
    register_secrets(api_key, *(value for name, value in headers.items()
                                if any(word in name.lower() for word in ("auth", "key", "token"))))
    if api_key:
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers["Authorization"] = f"Bearer {api_key}"
    http = httpx.Client(base_url=base_url or get_base_url(), headers=headers, timeout=timeout_s)
    return Client(http_client=http)


def span_annotation(span_id: str, score: Score, session_id: str | None = None) -> dict[str, Any]:
    """One score as the phoenix client's SpanAnnotationData (``session_id``: its conversation)."""
    result: dict[str, Any] = {"label": score_label(score)}
    if score.ok:
        result["score"] = score.value
        result["explanation"] = rationale(score)  # the verdict, direction and unsupported phrases in words
    else:
        result["explanation"] = score.error or "the metric returned no value"
    metadata: dict[str, Any] = {
        "higher_is_better": score.higher_is_better,
        "hallucinated": score.hallucinated,
        "threshold": score.threshold,
        "unsupported_spans": spans_summary(score),
        "record_id": score.record_id,
        "session_id": session_id,
    }
    return {"span_id": span_id, "name": score.metric, "annotator_kind": annotator_kind(score), "result": result,
            "identifier": IDENTIFIER,
            "metadata": {key: value for key, value in metadata.items() if value is not None}}


class PhoenixSink(Sink):
    """``timeout_s`` bounds each HTTP request of the client built here; ``max_attempts`` bounds the
    tries of one record (404, 429, 5xx and transport errors retried), ``backoff_s`` doubling.
    ``project``/``annotation_configs``: the project whose annotation configs make Phoenix colour the
    scores good or bad, and whether to set them (``sinks.phoenix_configs``)."""

    name = "phoenix"
    out_of_process = True  # configured from the Settings and its SDK's variables; sends synchronously
    # the project the request's spans go to, read in the application's process (the configs are assigned there)
    trace_link = (PROJECT_LINK, traced_project)

    def __init__(
        self,
        client: Any = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        project: str | None = None,
        annotation_configs: bool = True,
    ) -> None:
        try:
            import httpx
            import phoenix.client  # noqa: F401  (the extra is installed)
        except ImportError as error:
            raise missing_extra("phoenix", "the Phoenix sink", error) from None
        self._httpx = httpx
        if client is None:
            client = phoenix_client(base_url, api_key, timeout_s)
        self.client = client
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        http = getattr(client, "_client", None)  # the phoenix client's own httpx client
        self.configs = AnnotationConfigs(http, project) if annotation_configs and http is not None else None

    def emit(self, record: Record, scores: list[Score]) -> None:
        if not record.span_id:
            log.debug("record %s has no span id: no Phoenix annotation sent", record.id)
            return
        if not scores:
            return
        annotations = [span_annotation(record.span_id, score, record.session_id) for score in scores]
        httpx = self._httpx

        def retryable(error: Exception) -> bool:
            # 404: the span is not ingested yet (Phoenix ingests in batches)
            if isinstance(error, httpx.HTTPStatusError):
                status = error.response.status_code
                return status in (404, 429) or status >= 500
            return isinstance(error, httpx.TransportError)

        try:
            retry_with_backoff(
                lambda: self.client.spans.log_span_annotations(span_annotations=annotations, sync=True),
                attempts=self.max_attempts, backoff_s=self.backoff_s, retryable=retryable,
            )
        except httpx.HTTPStatusError as error:
            raise RuntimeError(self._refusal(record.span_id, error.response.status_code)) from error
        except httpx.TransportError as error:
            raise RuntimeError(
                f"Phoenix annotations of span {record.span_id} failed: {type(error).__name__}: {error}"
            ) from error
        if self.configs is not None:  # the span, and so its project, exists now
            self.configs.ensure(scores, record.trace_links.get(PROJECT_LINK))

    def _refusal(self, span_id: str, status: int) -> str:
        if status == 404:
            return (f"Phoenix has no span {span_id} after {self.max_attempts} attempts: not ingested yet, "
                    "or the endpoint is not the Phoenix the application exports its spans to")
        return f"Phoenix refused the annotations of span {span_id}: HTTP {status}"
