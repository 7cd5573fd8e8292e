"""`context_recall` (RAGAS): the share of the reference answer's statements that the retrieved
contexts support (can be attributed to them).

    value = attributed reference statements / reference statements      higher = better retrieval

It measures retrieval, not the answer, so it points at no answer text. A reference with no
checkable statements scores ``no_statements_score`` (default 1.0) with a reason.
"""

from __future__ import annotations

from typing import Any

from groundtrace.metrics.base import Result
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.statements import extract, listed, verify
from groundtrace.record import Record


class ContextRecall(JudgeMetric):
    name = "context_recall"
    description = "LLM judge (RAGAS): share of the reference's statements found in the contexts (needs a reference)."
    requires = ("contexts", "reference")
    higher_is_better = True
    default_threshold = 0.5  # uncalibrated: flagged when the contexts hold less than half the reference
    prompt_files = ("statements", "verify")

    def __init__(self, *, no_statements_score: float = 1.0, **options: Any) -> None:
        super().__init__(**options)
        self.no_statements_score = float(no_statements_score)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        statements = extract(run, record.reference, name="reference answer", question=record.question)
        if not statements:
            return Result(self.no_statements_score, "the judge found no checkable statements in the reference "
                          f"(context recall {self.no_statements_score:g} by definition)", details={"statements": []})
        checked = verify(run, statements, record.contexts, evidence_name="retrieved context",
                         no_evidence_reason="no contexts were retrieved")
        missing = [c for c in checked if not c.supported]
        value = sum(c.support for c in checked) / len(checked)
        reason = f"{len(checked) - len(missing)} of {len(checked)} reference statements are found in the contexts"
        if missing:
            reason += f"; missing: {listed(missing)}"
        return Result(value, reason, [], {"statements": [c.as_dict() for c in checked],
                                          "attributed": len(checked) - len(missing), "total": len(checked)})
