"""`faithfulness` (RAGAS): the share of the answer's statements that the contexts support.

    statements = judge("split the answer into atomic statements")
    verdict_i  = judge("is statement i supported by the contexts?")  ∈ {0, 1}  (mean over n samples)
    value      = Σ verdict_i / |statements|                            higher = more grounded

An answer with no checkable statements ("I don't know") scores ``no_statements_score`` (default
1.0: nothing in it is unsupported), with a reason saying so, never NaN. Unsupported statements
become spans where the judge's verbatim quote (or the statement) is found in the answer.
"""

from __future__ import annotations

from typing import Any

from groundtrace.metrics.base import Result
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.statements import extract, listed, point_at, verify
from groundtrace.record import Record


class Faithfulness(JudgeMetric):
    name = "faithfulness"
    description = "LLM judge (RAGAS): share of the answer's statements supported by the contexts."
    requires = ("answer", "contexts")
    higher_is_better = True
    # Uncalibrated (it depends on the judge model): flagged when fewer than 3 of 4 statements are
    # supported. Fit one for your judge with `groundtrace bench --threshold-from`.
    default_threshold = 0.75
    prompt_files = ("statements", "verify")

    def __init__(self, *, no_statements_score: float = 1.0, **options: Any) -> None:
        super().__init__(**options)
        self.no_statements_score = float(no_statements_score)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        statements = extract(run, record.answer, name="answer", question=record.question)
        if not statements:
            return Result(self.no_statements_score, "the judge found no checkable statements in the answer, so none is "
                          f"unsupported (faithfulness {self.no_statements_score:g} by definition)", details={"statements": []})
        checked = verify(run, statements, record.contexts, evidence_name="retrieved context",
                         no_evidence_reason="no contexts were retrieved")
        unsupported = [c for c in checked if not c.supported]
        value = sum(c.support for c in checked) / len(checked)
        spans = point_at(record.answer, checked, "unsupported")
        reason = f"{len(checked) - len(unsupported)} of {len(checked)} statements are supported by the contexts"
        if unsupported:
            reason += f"; unsupported: {listed(unsupported)}"
        return Result(value, reason, spans, {"statements": [c.as_dict() for c in checked],
                                             "supported": len(checked) - len(unsupported), "total": len(checked)})
