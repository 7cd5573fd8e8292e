"""MLflow sink: one Feedback assessment per Score on the request's MLflow trace.

Finding the trace: MLflow trace ids ('tr-...') are not OpenTelemetry ids, so the sink names a
link lookup, ``MLflowSink.trace_link``, that returns ``mlflow.get_active_trace_id()`` while a
request runs, only if the application has imported mlflow itself. The Monitor that uses the sink,
and the capture kit before a lazily built Monitor exists, register it with ``trace_context``
(``sinks.register_trace_links``); importing this module registers nothing. Adapters call
``trace_context.current_links()`` when the root run starts AND when it ends and merge both into
``record.trace_links``: whether MLflow's LangChain callback
(``mlflow.langchain.autolog()``) has opened its span depends on callback order. Measured with
mlflow 3.17.2 and langchain-core 1.7.2: a handler passed in the call's config sees no active
MLflow trace at root start and sees it at root end. ``mlflow.get_last_active_trace_id()`` is
not used: it is set only after the trace ends, and it is process-wide, so under concurrency it
could name another request's trace.

Delivery: ``mlflow.log_feedback(trace_id, name=metric, value, rationale, source, metadata)``, where the value
is the verdict (True: grounded, False: hallucinated; MLflow shows Pass / Fail) or, for a Score without
one, the value turned higher-is-better (MLflow draws numbers so); the rationale says the label, the
rounded value, the threshold, the direction and the unsupported phrases (``sinks.readable``), and the
metadata keeps the exact value
(the source ``CODE`` / ``groundtrace`` for the offline metrics, ``LLM_JUDGE`` / ``groundtrace/<judge
model>`` for the judge metrics), to wherever the application's MLflow writes
(``MLFLOW_TRACKING_URI`` or ``mlflow.set_tracking_uri``): an assessment must go to the store that
holds the trace, so there is deliberately no separate URI here. Traces are exported
asynchronously, so a trace that is not found yet triggers ``mlflow.flush_trace_async_logging()``
and a bounded retry with backoff; still missing after that, the sink raises. An error Score
becomes a Feedback with MLflow's own ``error`` field (no value, never NaN). The conversation of the
turn goes in the metadata as ``session_id``: an assessment has no session field, and MLflow groups
sessions by the trace's own ``mlflow.trace.session`` metadata, which the traced application sets.

MLflow's HTTP client retries for minutes by its own settings, so each record runs under a
deadline (``timeout_s``); past it the call is abandoned in a daemon thread and TimeoutError
is raised.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from groundtrace._extras import missing_extra
from groundtrace.record import Record
from groundtrace.redaction import get_logger
from groundtrace.score import Score
from groundtrace.sinks import Sink, retry_with_backoff, score_label, spans_summary
from groundtrace.sinks.readable import higher_reads_better, passed, rationale
from groundtrace.sinks.results import LLM, annotator_kind, judge_model

log = get_logger("groundtrace.sinks.mlflow")

LINK = "mlflow"
SOURCE_ID = "groundtrace"
ERROR_CODE = "GROUNDTRACE_METRIC_ERROR"
T = TypeVar("T")


def active_mlflow_trace_id() -> str | None:
    """The MLflow trace of the current request, if the application traces with MLflow."""
    mlflow = sys.modules.get("mlflow")  # never import it here: that would cost seconds per app
    get_active = getattr(mlflow, "get_active_trace_id", None)
    return get_active() if get_active is not None else None



def feedback_source(score: Score) -> Any:
    """Who judged: MLflow's LLM_JUDGE, named ``groundtrace/<judge model>``, for a judge metric's Score; CODE,
    ``groundtrace``, for the offline metrics."""
    from mlflow.entities import AssessmentSource

    if annotator_kind(score) == LLM:
        model = judge_model(score)
        return AssessmentSource(source_type="LLM_JUDGE", source_id=f"{SOURCE_ID}/{model}" if model else SOURCE_ID)
    return AssessmentSource(source_type="CODE", source_id=SOURCE_ID)


def written_by_groundtrace(source: Any) -> bool:
    """Whether an assessment's source is one :func:`feedback_source` makes."""
    source_id = str(getattr(source, "source_id", None) or "")
    return (getattr(source, "source_type", None) in ("CODE", "LLM_JUDGE")
            and (source_id == SOURCE_ID or source_id.startswith(SOURCE_ID + "/")))


def feedback_metadata(score: Score, session_id: str | None = None) -> dict[str, str]:
    # MLflow stores assessment metadata as strings
    metadata = {
        "label": score_label(score),
        "higher_is_better": str(score.higher_is_better).lower(),
        "unsupported_spans": json.dumps(spans_summary(score), ensure_ascii=False),
    }
    if score.value is not None:  # the metric's own value; the assessment's is the verdict
        metadata["value"] = repr(score.value)
    if score.hallucinated is not None:
        metadata["hallucinated"] = str(score.hallucinated).lower()
    if score.threshold is not None:
        metadata["threshold"] = repr(score.threshold)
    if score.record_id:
        metadata["record_id"] = score.record_id
    if session_id:
        metadata["session_id"] = session_id
    return metadata


def run_with_deadline(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """``call()`` in a daemon thread; TimeoutError if it has not returned after ``timeout_s``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    thread = threading.Thread(target=target, name="groundtrace-mlflow-sink", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout_s:g} s (timeout_s); the call was abandoned")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class MLflowSink(Sink):
    """``timeout_s`` bounds the delivery of one record's Scores, retries included; ``max_attempts``
    bounds the looks for a trace not exported yet, ``backoff_s`` doubling between them."""

    name = "mlflow"
    trace_link = (LINK, active_mlflow_trace_id)

    def __init__(self, *, timeout_s: float = 30.0, max_attempts: int = 4, backoff_s: float = 0.5) -> None:
        try:
            import mlflow
            from mlflow.entities import AssessmentError
            from mlflow.exceptions import MlflowException
        except ImportError as error:
            raise missing_extra("mlflow", "the MLflow sink", error) from None
        self._mlflow = mlflow
        self._error_type = AssessmentError
        self._mlflow_exception = MlflowException
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s

    def emit(self, record: Record, scores: list[Score]) -> None:
        trace_id = record.trace_links.get(LINK)
        if not trace_id:
            log.debug("record %s has no MLflow trace id: no feedback logged", record.id)
            return
        run_with_deadline(lambda: self._log_all(trace_id, scores, record.session_id), self.timeout_s, f"MLflow feedback on trace {trace_id}")

    def _log_all(self, trace_id: str, scores: list[Score], session_id: str | None) -> None:
        pending = list(scores)

        def log_pending() -> None:
            while pending:
                self._log(trace_id, pending[0], session_id)
                pending.pop(0)

        def missing(error: Exception) -> bool:
            return isinstance(error, self._mlflow_exception) and error.error_code == "RESOURCE_DOES_NOT_EXIST"

        try:
            # a missing trace is still in MLflow's async export queue: push it out, then look again
            retry_with_backoff(log_pending, attempts=self.max_attempts, backoff_s=self.backoff_s, retryable=missing,
                               before_retry=self._mlflow.flush_trace_async_logging)
        except self._mlflow_exception as error:
            if missing(error):
                raise RuntimeError(
                    f"MLflow has no trace {trace_id} after {self.max_attempts} attempts: does the tracking URI "
                    "(MLFLOW_TRACKING_URI or mlflow.set_tracking_uri) name the store the application traces to?"
                ) from error
            raise RuntimeError(f"MLflow feedback on trace {trace_id} failed: {error}") from error

    def _log(self, trace_id: str, score: Score, session_id: str | None) -> None:
        if score.ok:
            verdict = passed(score)  # MLflow draws a number as higher-is-better: a verdict reads right
            outcome: dict[str, Any] = {"value": verdict if verdict is not None else higher_reads_better(score),
                                       "rationale": rationale(score)}
        else:
            message = score.error or "the metric returned no value"
            outcome = {"error": self._error_type(error_code=ERROR_CODE, error_message=message),
                       "rationale": score.reason or None}
        self._mlflow.log_feedback(trace_id=trace_id, name=score.metric, source=feedback_source(score),
                                  metadata=feedback_metadata(score, session_id), **outcome)
