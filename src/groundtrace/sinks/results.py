"""One Score as an evaluation result in the conventions the sinks speak.

- OpenTelemetry GenAI (semantic conventions v1.41): the ``gen_ai.evaluation.result`` event's attributes,
  each at its type and requirement level: the name always; the value and label where there is one; the
  explanation only when there is one; ``gen_ai.response.id`` where the evaluated reply's id is known;
  ``error.type`` when the evaluation failed.
- OpenInference (annotations spec): ``evaluations.0.evaluation.*`` on a carrier span, with the kind of judge.
- Who judged (``annotator_kind``): ``LLM`` for a Score a language model produced, ``CODE`` otherwise;
  the Phoenix and MLflow sinks say the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

from groundtrace.record import Record
from groundtrace.score import Score
from groundtrace.sinks import score_label, spans_summary

LLM, CODE = "LLM", "CODE"
OTHER_ERROR = "_OTHER"  # OpenTelemetry's value for an error of no known type
# "ValueError: ..." as Metric.score words a metric's own exception
_RAISED = re.compile(r"^([A-Z][A-Za-z0-9_]*(?:Error|Exception|Timeout|Exit)):")


def annotator_kind(score: Score) -> str:
    """``LLM`` when a judge model produced (or was asked for) the Score: a judge metric's Score carries
    ``details["judge"]``, a combined one the judge's tokens; ``CODE`` for the offline metrics."""
    if "judge" in score.details:
        return LLM
    cost = score.cost
    return LLM if cost is not None and (cost.input_tokens or cost.output_tokens) else CODE


def judge_model(score: Score) -> str | None:
    judge = score.details.get("judge")
    model = judge.get("model") if isinstance(judge, dict) else None
    return model if isinstance(model, str) and model else None


def error_type(score: Score) -> str | None:
    """A low-cardinality name for a failed evaluation (``error.type``): ``judge_<kind>`` for a judge's
    failure (timeout, unavailable, parse, http, config, ...), the exception's class for a metric that
    raised, ``_OTHER`` otherwise (a record the metric cannot score: its message says why). None if it
    did not fail."""
    if score.error is None:
        return None
    kind = score.details.get("error_kind")
    if isinstance(kind, str) and kind:
        return f"judge_{kind}"
    raised = _RAISED.match(score.error)
    return raised.group(1) if raised else OTHER_ERROR


def response_id(record: Record) -> str | None:
    """The id the model's provider gave the evaluated reply (``metadata["response_id"]``, captured by the
    integrations where the provider sends one)."""
    found = record.metadata.get("response_id")
    return found if isinstance(found, str) and found else None


def genai_attributes(score: Score, reply_id: str | None = None) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` event's attributes; absent fields are omitted, never empty."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": score.metric}
    if score.value is not None:
        attributes["gen_ai.evaluation.score.value"] = float(score.value)
    if (label := score_label(score)) != "unknown":  # a metric with no threshold has no label to give
        attributes["gen_ai.evaluation.score.label"] = label
    if score.reason:
        attributes["gen_ai.evaluation.explanation"] = score.reason
    if reply_id:
        attributes["gen_ai.response.id"] = reply_id
    if (failed := error_type(score)) is not None:
        attributes["error.type"] = failed
    return attributes


def openinference_attributes(score: Score) -> dict[str, Any]:
    """``evaluations.0.evaluation.*``: one span-scoped result (the carrier's link names its target); the
    metadata a JSON object, as the spec wants it."""
    prefix = "evaluations.0.evaluation."
    attributes: dict[str, Any] = {prefix + "name": score.metric, prefix + "label": score_label(score),
                                  prefix + "annotator_kind": annotator_kind(score)}
    if score.value is not None:
        attributes[prefix + "score"] = float(score.value)
    explanation = score.reason or score.error
    if explanation:
        attributes[prefix + "explanation"] = explanation
    metadata = {"higher_is_better": score.higher_is_better, "threshold": score.threshold,
                "hallucinated": score.hallucinated, "unsupported_spans": spans_summary(score) or None,
                "judge_model": judge_model(score)}
    attributes[prefix + "metadata"] = json.dumps({k: v for k, v in metadata.items() if v is not None},
                                                 ensure_ascii=False)
    return attributes


__all__ = ["CODE", "LLM", "annotator_kind", "error_type", "genai_attributes", "judge_model",
           "openinference_attributes", "response_id"]
