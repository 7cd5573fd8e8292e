"""groundtrace: hallucination and grounding scores for RAG answers."""

from groundtrace.engine import Evaluator, evaluate
from groundtrace.frame import score_frame
from groundtrace.metrics import Metric, get_metric, metric_names, register_metric
from groundtrace.record import Record
from groundtrace.score import Cost, Score, ScoredRecord, Span

__version__ = "0.1.0"

__all__ = [
    "Cost",
    "Evaluator",
    "Metric",
    "Record",
    "Score",
    "ScoredRecord",
    "Span",
    "evaluate",
    "get_metric",
    "metric_names",
    "register_metric",
    "score_frame",
]
