"""``assert_grounded``: a pytest (or plain ``assert``-style) check that an answer is grounded in its
contexts, for a CI suite that must fail when answers stop being grounded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundtrace.metrics import Metric, get_metric
from groundtrace.score import Score


def assert_grounded(answer: str, contexts: Sequence[Any], question: str | None = None,
                    metric: str | Metric = "grounding", **options: Any) -> Score:
    """Score ``answer`` against ``contexts`` with ``metric`` (a name or instance; ``options``: its keyword
    arguments, e.g. ``threshold=0.3``) and return the Score when the metric does not flag it.

    Raises AssertionError when the answer is flagged, with the value, the threshold, the reason and
    the flagged text in the message, and also when it cannot be scored (an empty answer, say): a
    check that could not run must not pass."""
    __tracebackhide__ = True  # pytest shows the caller's line and this message, not this function's body
    scorer = get_metric(metric, **options)
    texts = [contexts] if isinstance(contexts, str) else list(contexts)
    score = scorer.score({"question": question, "answer": answer, "contexts": texts})
    if not score.ok:
        raise AssertionError(f"the answer could not be checked for grounding: {score.explain()}")
    if score.hallucinated:
        raise AssertionError(f"the answer is not grounded in its contexts:\n{score.explain()}")
    return score


__all__ = ["assert_grounded"]
