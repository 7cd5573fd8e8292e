"""groundtrace: hallucination and grounding scores for RAG answers."""

from typing import TYPE_CHECKING

from groundtrace.backends.verdict import VerdictFileError
from groundtrace.scoring.engine import Evaluator, evaluate
from groundtrace.errors import ConfigError, GroundtraceError, MissingExtraError, ModelUnavailableError
from groundtrace.batch.frame import score_frame
from groundtrace.metrics import Metric, get_metric, metric_names, register_metric
from groundtrace.record import Record
from groundtrace.score import Cost, Score, ScoredRecord, Span
from groundtrace.capture.explicit import turn
from groundtrace.capture.marked import retrieval
from groundtrace.capture.request import ASGIMiddleware, WSGIMiddleware, request_scope
from groundtrace.capture.session import current_session, session

if TYPE_CHECKING:
    from groundtrace.guards import Decision, Guard, GuardBlocked, guard
    from groundtrace.monitor import Monitor

__version__ = "0.1.0"

__all__ = [
    "ASGIMiddleware",
    "ConfigError",
    "Cost",
    "Decision",
    "Evaluator",
    "GroundtraceError",
    "Guard",
    "GuardBlocked",
    "Metric",
    "MissingExtraError",
    "ModelUnavailableError",
    "Monitor",
    "Record",
    "Score",
    "ScoredRecord",
    "Span",
    "VerdictFileError",
    "WSGIMiddleware",
    "current_session",
    "evaluate",
    "get_metric",
    "guard",
    "metric_names",
    "register_metric",
    "request_scope",
    "retrieval",
    "score_frame",
    "session",
    "turn",
]


def __getattr__(name: str) -> object:
    # Monitor brings its queue, worker threads and process machinery: imported on first use, so that
    # `import groundtrace` stays fast and starts nothing
    if name == "Monitor":
        from groundtrace.monitor import Monitor

        return Monitor
    if name in ("guard", "Guard", "GuardBlocked", "Decision"):  # guard mode: its thread pool made on first use
        from groundtrace import guards

        return getattr(guards, name)
    raise AttributeError(f"module 'groundtrace' has no attribute {name!r}")
