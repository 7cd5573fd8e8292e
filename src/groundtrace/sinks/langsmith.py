"""LangSmith sink: one feedback per Score on the request's root run (``record.run_id``).

Feedback fields: ``key`` = metric, ``score`` = the verdict as LangSmith reads a score, higher-is-better
(1: grounded, 0: hallucinated; without a verdict the value turned higher-is-better), ``value`` = label
('grounded', 'hallucinated', 'unknown'), ``comment`` = the label, rounded value, threshold, direction,
unsupported phrases and reason (``sinks.readable``); the exact value, direction, verdict, threshold and
the unsupported spans go in ``extra``. An error Score becomes feedback with ``error=True``,
``value='error'``, no score, and the error as comment: the failure shows next to the run
instead of silently missing, and no number is invented.

Settings come from the SDK's environment (``LANGSMITH_API_KEY``, ``LANGSMITH_ENDPOINT``,
``LANGSMITH_PROJECT``); constructor arguments override them, or pass a ready ``langsmith.Client``.
Our own client sends feedback synchronously (the Monitor already calls ``emit`` from a worker
thread), so a failure raises and the Monitor counts it; a ready client that batches in the
background is drained by ``flush()``.

LangSmith deprecates run-level feedback without ``session_id`` (the project id) and SmithDB-only
deployments refuse it, so the project id is looked up once per project name: the adapter's
``record.trace_links['langsmith_project']`` when it captured the tracer's project, else the
configured project. That ``session_id`` is LangSmith's name for a project; the conversation of the
turn (``record.session_id``) goes in the feedback's ``extra`` as ``session_id``: feedback has no field
of its own for it, and LangSmith groups a thread by the run's metadata (``session_id``, ``thread_id``
or ``conversation_id``), which the traced application already set on the run the feedback sits on.
"""

from __future__ import annotations

import threading
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.redaction import get_logger, register_secrets
from groundtrace.score import Score
from groundtrace.sinks import Sink, score_label, spans_summary
from groundtrace.sinks.readable import higher_reads_better, passed, rationale

log = get_logger("groundtrace.sinks.langsmith")

PROJECT_LINK = "langsmith_project"


def feedback_fields(score: Score, session_id: str | None = None) -> dict[str, Any]:
    """The create_feedback arguments that describe one Score (``session_id``: its conversation)."""
    fields: dict[str, Any] = {
        "key": score.metric,
        "value": score_label(score),
        "comment": rationale(score),
        "extra": {
            "value": score.value,  # the metric's own value; the feedback's score is the verdict
            "higher_is_better": score.higher_is_better,
            "hallucinated": score.hallucinated,
            "threshold": score.threshold,
            "unsupported_spans": spans_summary(score),
            "record_id": score.record_id,
        },
        "feedback_source_type": "model",  # an automatic evaluator, not a person or the app
        "source_info": {"name": "groundtrace"},
    }
    if session_id:
        fields["extra"]["session_id"] = session_id
    if score.ok:  # LangSmith reads a score as higher-is-better: 1 grounded, 0 hallucinated
        verdict = passed(score)
        fields["score"] = (1.0 if verdict else 0.0) if verdict is not None else higher_reads_better(score)
    else:
        fields.update(value="error", error=True, comment=score.error or "the metric returned no value")
    return fields


def build_client(api_url: str | None, api_key: str | None, timeout_s: float) -> Any:
    """A ``langsmith.Client`` that sends at once (no background batching), with the SDK's own
    settings (``LANGSMITH_ENDPOINT``, ``LANGSMITH_API_KEY``) where an argument is None."""
    import langsmith
    from langsmith import utils as ls_utils

    client = langsmith.Client(
        api_url=api_url,
        api_key=api_key,
        timeout_ms=int(timeout_s * 1000),
        # one retry policy, not two stacked: request_with_retries retries connection
        # errors, 5xx and 404 (the run may not be ingested yet) with backoff
        retry_config=ls_utils.LangSmithRetry(total=0),
        auto_batch_tracing=False,
    )
    register_secrets(api_key, client.api_key)  # the key given, or the one the SDK found
    return client


def _first_line(error: BaseException) -> str:
    # The SDK's connection errors carry a masked API key on a later line: keep it out of our logs.
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


class LangSmithSink(Sink):
    """``timeout_s`` bounds each HTTP request, ``max_attempts`` the tries of each feedback (backoff
    1 s, 2 s, ... between them); both apply to the client built here, not to a ready one."""

    name = "langsmith"
    out_of_process = True  # configured from the Settings and its SDK's variables; sends synchronously

    def __init__(
        self,
        client: Any = None,
        *,
        api_key: str | None = None,
        api_url: str | None = None,
        project_name: str | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        try:
            from langsmith import utils as ls_utils
        except ImportError as error:
            raise missing_extra("langsmith", "the LangSmith sink", error) from None
        self._not_found = ls_utils.LangSmithNotFoundError
        self.client = client if client is not None else build_client(api_url, api_key, timeout_s)
        self.project_name: str = project_name or ls_utils.get_tracer_project() or "default"  # LangSmith's own default
        self.max_attempts = max(1, max_attempts)
        self._project_ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def emit(self, record: Record, scores: list[Score]) -> None:
        if not record.run_id:
            log.debug("record %s has no LangSmith run id: no feedback sent", record.id)
            return
        if not scores:
            return
        session_id = self._project_id(record.trace_links.get(PROJECT_LINK) or self.project_name)
        for score in scores:
            try:
                self.client.create_feedback(
                    run_id=record.run_id,
                    trace_id=record.run_id,  # the root run is the trace
                    session_id=session_id,
                    stop_after_attempt=self.max_attempts,
                    **feedback_fields(score, record.session_id),
                )
            except Exception as error:
                raise RuntimeError(
                    f"LangSmith feedback '{score.metric}' on run {record.run_id} failed: {_first_line(error)}"
                ) from error

    def _project_id(self, project_name: str) -> str | None:
        with self._lock:
            if project_name in self._project_ids:
                return self._project_ids[project_name]
        try:
            project_id = str(self.client.read_project(project_name=project_name).id)
        except self._not_found:
            # not created yet (its first run is still in flight): LangSmith can still find the
            # run without it on most deployments; look again next time
            log.debug("LangSmith project %r not found; sending feedback without session_id", project_name)
            return None
        except Exception as error:
            raise RuntimeError(f"LangSmith project {project_name!r} lookup failed: {_first_line(error)}") from error
        with self._lock:
            self._project_ids[project_name] = project_id
        return project_id

    def flush(self, timeout_s: float = 30.0) -> None:
        # a ready client may batch feedback in its background queue
        self.client.flush(timeout=timeout_s)
