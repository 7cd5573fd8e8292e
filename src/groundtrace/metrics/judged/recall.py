"""`context_recall` (RAGAS): the share of the reference answer's statements that the retrieved
contexts support (can be attributed to them).

    value = attributed reference statements / reference statements      higher = better retrieval

It measures retrieval, not the answer, so it points at no answer text. A reference with no
checkable statements scores ``no_statements_score`` (default 1.0) with a reason.
"""

from __future__ import annotations

from groundtrace.metrics.judged.support import ContextSupportShare


class ContextRecall(ContextSupportShare):
    name = "context_recall"
    description = "LLM judge (RAGAS): share of the reference's statements found in the contexts (needs a reference)."
    requires = ("contexts", "reference")
    higher_is_better = True
    default_threshold = 0.5  # uncalibrated: flagged when the contexts hold less than half the reference
    source, source_name = "reference", "reference answer"
    empty_reason = "the judge found no checkable statements in the reference (context recall {score:g} by definition)"
    summary = "{kept} of {total} reference statements are found in the contexts"
    missing_label, count_key = "missing", "attributed"
