"""groundtrace metrics inside the evaluation loops users already run: a LangSmith evaluator for
``langsmith.evaluate`` and an MLflow GenAI scorer for ``mlflow.genai.evaluate``.

Neither SDK is imported here until a scorer is built (MLflow) or never (LangSmith takes a plain
function). Both read one example the same way:

- the question: ``inputs`` (a string, or a ``question`` / ``query`` / ``input`` / ``user_input`` key);
- the answer: ``outputs`` (a string, or an ``answer`` / ``output`` / ``response`` / ``result`` key);
- the contexts: LangSmith: ``outputs["contexts"]`` or ``outputs["documents"]`` (strings, LangChain
  Documents or dicts with ``page_content`` / ``text``), else ``inputs["contexts"]``; MLflow: the
  documents of the trace's RETRIEVER spans (the last RERANKER's, when one ran), else
  ``inputs["contexts"]``;
- the reference, for the metrics that need one: ``reference_outputs`` / ``expectations`` (a string,
  or a ``reference`` / ``expected_response`` / ``answer`` / ``output`` key).

A record the metric cannot score gives an error result that says what was missing (LangSmith:
feedback with ``error``; MLflow: a Feedback with an ``AssessmentError``), never a made-up number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.metrics import Metric, get_metric
from groundtrace.record import Record
from groundtrace.score import Score
from groundtrace.sinks import score_label, spans_summary
from groundtrace.sinks.mlflow import ERROR_CODE, feedback_metadata, feedback_source
from groundtrace.sources.spans import answer_of, contexts_of, question_of, text_of

CONTEXT_KEYS = ("contexts", "documents")
REFERENCE_KEYS = ("reference", "expected_response", "expected_output", "ground_truth", "answer", "output")
TARGET_SHAPE = "return {'answer': str, 'contexts': [str, ...]} (or 'output' and 'documents')"


def _contexts(*holders: Any) -> Any:
    for holder in holders:
        if isinstance(holder, Mapping):
            for key in CONTEXT_KEYS:
                if holder.get(key) is not None:
                    return holder[key]
    return None


def _keys(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, Mapping) and value else "none"


def score_example(metric: Metric, inputs: Any, outputs: Any, reference: Any = None,
                  contexts: Any = None, where: str = "outputs") -> Score:
    """``metric``'s Score of one evaluation example; ``contexts``: found elsewhere (a trace), else read
    from ``outputs`` and ``inputs``. Never raises: what is missing becomes an error Score naming it."""
    answer = answer_of(outputs)
    if answer is None:
        return metric.error(f"the {where} hold no answer (keys: {_keys(outputs)}): {TARGET_SHAPE}")
    try:
        record = Record(question=question_of(inputs), answer=answer,
                        contexts=contexts if contexts is not None else _contexts(outputs, inputs),
                        reference=text_of(reference, REFERENCE_KEYS, {"assistant", "ai"}) if reference else None)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        return metric.error(f"the example cannot be read as a record: {error}")
    if record.contexts is None and "contexts" in metric.requires:
        return metric.error(f"no contexts: neither {where} nor inputs hold 'contexts' or 'documents' "
                            f"(keys: {_keys(outputs)} / {_keys(inputs)}): {TARGET_SHAPE}")
    return metric.score(record)


# ------------------------------------------------------------------------------------ LangSmith
def langsmith_result(score: Score) -> dict[str, Any]:
    """A LangSmith evaluation result: ``key`` = metric, ``score`` = value, ``comment`` = reason; the label,
    direction, verdict, threshold and flagged spans in ``extra``. An error Score has no score, value
    'error' and ``extra.error``, which LangSmith stores as error feedback."""
    extra: dict[str, Any] = {"higher_is_better": score.higher_is_better, "hallucinated": score.hallucinated,
                             "threshold": score.threshold, "unsupported_spans": spans_summary(score)}
    if not score.ok:
        extra["error"] = True
    return {"key": score.metric, "score": score.value, "value": score_label(score),
            "comment": score.reason or score.error, "extra": extra}


def langsmith_evaluator(metric: str | Metric = "grounding", **options: Any) -> Callable[..., dict[str, Any]]:
    """An evaluator for ``langsmith.evaluate(target, data=..., evaluators=[...])``: called with the
    example's ``inputs``, the target's ``outputs`` and the example's ``reference_outputs``, it returns
    ``{"key": metric, "score": value, "value": label, "comment": reason, "extra": {...}}``.

    The target should return ``{"answer": str, "contexts": [str, ...]}`` (or ``output`` and ``documents``);
    ``options`` are the metric's (``threshold=``, ...)."""
    scorer = get_metric(metric, **options)

    def evaluate(inputs: Any = None, outputs: Any = None, reference_outputs: Any = None) -> dict[str, Any]:
        return langsmith_result(score_example(scorer, inputs, outputs, reference_outputs))

    evaluate.__name__ = evaluate.__qualname__ = scorer.name  # LangSmith names the evaluator by it
    return evaluate


# --------------------------------------------------------------------------------------- MLflow
def trace_contexts(trace: Any) -> list[str] | None:
    """The documents of an MLflow trace's retriever (or last reranker) spans; None without any."""
    if trace is None:
        return None
    from groundtrace.sources.mlflow import trace_views

    views, _ = trace_views(trace)
    return contexts_of(views) or None


def mlflow_feedback(score: Score) -> Any:
    """An MLflow Feedback of a Score: value, rationale = reason, and in metadata the label, direction,
    verdict, threshold and flagged spans (as the MLflow sink writes them); an error Score as a Feedback
    with an AssessmentError."""
    from mlflow.entities import AssessmentError, Feedback

    source = feedback_source(score)
    metadata = feedback_metadata(score)
    if score.ok:
        return Feedback(name=score.metric, value=score.value, rationale=score.reason or None, source=source,
                        metadata=metadata)
    return Feedback(name=score.metric, source=source, metadata=metadata, rationale=score.reason or None,
                    error=AssessmentError(error_code=ERROR_CODE, error_message=score.error or "no value"))


def mlflow_scorer(metric: str | Metric = "grounding", **options: Any) -> Any:
    """A scorer for ``mlflow.genai.evaluate(data=..., scorers=[...])`` named after the metric, returning a
    Feedback per row (see :func:`mlflow_feedback`); a row passes when the metric does not flag it.
    Contexts come from the row's trace (its retriever spans) when it has one, else ``inputs["contexts"]``;
    ``options`` are the metric's (``threshold=``, ...)."""
    try:
        from mlflow.genai.scorers import scorer as mlflow_scorer_decorator
    except ImportError as error:
        raise missing_extra("mlflow", "the MLflow scorer", error) from None
    metric_ = get_metric(metric, **options)

    def score(inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None) -> Any:
        found = trace_contexts(trace)
        return mlflow_feedback(score_example(metric_, inputs, outputs, expectations, contexts=found))

    return mlflow_scorer_decorator(score, name=metric_.name, description=metric_.description,
                                   pass_if=lambda value: isinstance(value, (int, float)) and not metric_.verdict(value))


__all__ = ["langsmith_evaluator", "langsmith_result", "mlflow_feedback", "mlflow_scorer", "score_example", "trace_contexts"]
