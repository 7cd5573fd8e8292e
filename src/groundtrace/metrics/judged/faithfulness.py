"""`faithfulness` (RAGAS): the share of the answer's statements that the contexts support.

    statements = judge("split the answer into atomic statements")
    verdict_i  = judge("is statement i supported by the contexts?")  ∈ {0, 1}  (mean over n samples)
    value      = Σ verdict_i / |statements|                            higher = more grounded

An answer with no checkable statements ("I don't know") scores ``no_statements_score`` (default
1.0: nothing in it is unsupported), with a reason saying so, never NaN. Unsupported statements
become spans where the judge's verbatim quote (or the statement) is found in the answer.
"""

from __future__ import annotations

from groundtrace.metrics.judged.support import ContextSupportShare


class Faithfulness(ContextSupportShare):
    name = "faithfulness"
    description = "LLM judge (RAGAS): share of the answer's statements supported by the contexts."
    requires = ("answer", "contexts")
    higher_is_better = True
    # Uncalibrated (it depends on the judge model): flagged when fewer than 3 of 4 statements are
    # supported. Fit one for your judge with `groundtrace bench --threshold-from`.
    default_threshold = 0.75
    source, source_name = "answer", "answer"
    empty_reason = ("the judge found no checkable statements in the answer, so none is unsupported "
                    "(faithfulness {score:g} by definition)")
    summary = "{kept} of {total} statements are supported by the contexts"
    missing_label, count_key, spans_label = "unsupported", "supported", "unsupported"
