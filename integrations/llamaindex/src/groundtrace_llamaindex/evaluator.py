"""A groundtrace metric as a LlamaIndex evaluator, for LlamaIndex's own evaluation loop
(``evaluator.evaluate_response(query=, response=)``, ``BatchEvalRunner``).

    from llama_index.core.evaluation import BatchEvalRunner
    from groundtrace_llamaindex import GroundtraceEvaluator

    runner = BatchEvalRunner({"grounding": GroundtraceEvaluator()}, workers=2)
    results = await runner.aevaluate_queries(query_engine, queries=questions)

Each EvaluationResult has ``score`` = the metric's value (its direction is the metric's: for
``grounding``, higher = more hallucinated), ``passing`` = not flagged at the metric's threshold, and
``feedback`` = the reason, then the flagged text. A record the metric cannot score (no answer, an
empty one) is an ``invalid_result`` with the reason in ``invalid_reason``, never a made-up score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.prompts.mixin import PromptDictType

from groundtrace import Score, get_metric
from groundtrace.metrics import Metric


class GroundtraceEvaluator(BaseEvaluator):
    """``metric``: a groundtrace metric name or instance (default ``grounding``); ``options``: its keyword
    arguments (``threshold=``, ...)."""

    def __init__(self, metric: str | Metric = "grounding", **options: Any) -> None:
        self.metric = get_metric(metric, **options)

    def evaluate(self, query: str | None = None, response: str | None = None,
                 contexts: Sequence[str] | None = None, **kwargs: Any) -> EvaluationResult:
        """``reference=`` (a keyword) is passed on for the metrics that need one."""
        contexts = list(contexts) if contexts is not None else None
        # a mapping, not a Record: the metric turns a wrong type into an error Score naming the field
        score = self.metric.score({"question": query, "answer": response, "contexts": contexts,
                                   "reference": kwargs.get("reference")})
        texts = contexts if contexts is not None and all(isinstance(c, str) for c in contexts) else None
        return evaluation_result(score, query=query, response=response, contexts=texts)

    # a metric has no prompts for LlamaIndex to show or replace (a judge metric's are files of groundtrace's)
    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        pass

    async def aevaluate(self, query: str | None = None, response: str | None = None,
                        contexts: Sequence[str] | None = None, **kwargs: Any) -> EvaluationResult:
        # the metric runs on the CPU (or waits on a judge): off the event loop, so a runner's workers overlap
        return await asyncio.to_thread(self.evaluate, query, response, contexts, **kwargs)


def feedback(score: Score) -> str:
    """The reason, then the flagged text (each span quoted)."""
    return score.reason + (f"\nflagged text: {score.flagged_text()}" if score.spans else "")


def evaluation_result(score: Score, **example: Any) -> EvaluationResult:
    """The EvaluationResult of a Score; ``example``: query, response and contexts, as LlamaIndex keeps them."""
    if not score.ok:
        return EvaluationResult(**example, invalid_result=True, invalid_reason=score.error)
    return EvaluationResult(**example, score=score.value, passing=not score.hallucinated, feedback=feedback(score))


__all__ = ["GroundtraceEvaluator", "evaluation_result", "feedback"]
