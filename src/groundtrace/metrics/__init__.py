"""Metric registry: names to classes, imported only when first asked for."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from groundtrace.config import JudgeSettings, default_metrics
from groundtrace.metrics.base import Metric, Result

# name -> "module:Class"; third-party metrics register through the "groundtrace.metrics" entry point.
_BUILTIN = {
    "lexical": "groundtrace.metrics.lexical:LexicalMetric",
    "facts": "groundtrace.metrics.facts:FactsMetric",
    "grounding": "groundtrace.metrics.grounding:GroundingMetric",
    "grounding_xe": "groundtrace.metrics.grounding:GroundingXEMetric",  # grounding-2.1: the cross-encoder alone
    # several metrics' values in one calibrated probability, from a verdict file (groundtrace fit)
    "combined": "groundtrace.metrics.combined:CombinedMetric",
    # models of the Hugging Face Hub (the lettuce and transformers extras): groundtrace.backends.lettuce, .nli
    "lettuce": "groundtrace.metrics.lettuce:LettuceMetric",
    "nli": "groundtrace.metrics.nli:NLIMetric",
    # LLM-as-judge metrics (the openai extra): groundtrace.metrics.judged
    "faithfulness": "groundtrace.metrics.judged.faithfulness:Faithfulness",
    "answer_relevance": "groundtrace.metrics.judged.relevance:AnswerRelevance",
    "context_relevance": "groundtrace.metrics.judged.relevance:ContextRelevance",
    "context_recall": "groundtrace.metrics.judged.recall:ContextRecall",
    "answer_correctness": "groundtrace.metrics.judged.correctness:AnswerCorrectness",
    "answer_completeness": "groundtrace.metrics.judged.completeness:AnswerCompleteness",
    "hallucination": "groundtrace.metrics.judged.hallucination:Hallucination",
    "factuality": "groundtrace.metrics.judged.braintrust:Factuality",
    "numeric_rater": "groundtrace.metrics.judged.braintrust:NumericRater",
}
_registered: dict[str, type[Metric]] = {}


def judge_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether GROUNDTRACE_JUDGE_MODEL names a judge (see ``groundtrace.config.JudgeSettings``)."""
    return JudgeSettings.from_env(environ).configured


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Make a Metric subclass available by its name (usable as a class decorator)."""
    _registered[cls.name] = cls
    return cls


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="groundtrace.metrics")}


def metric_names() -> list[str]:
    return sorted({*_BUILTIN, *_registered, *_plugins()})


def metric_class(name: str) -> type[Metric]:
    if name in _registered:
        return _registered[name]
    target = _BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise KeyError(f"unknown metric '{name}'; available: {', '.join(metric_names())}")
    module, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    _registered[name] = cls
    return cls


def get_metric(spec: str | Metric, **options: Any) -> Metric:
    """A metric instance from a name (with constructor options) or an instance (returned as is)."""
    if isinstance(spec, Metric):
        return spec
    return metric_class(spec)(**options)


__all__ = ["Metric", "Result", "default_metrics", "get_metric", "judge_configured", "metric_class", "metric_names", "register_metric"]
