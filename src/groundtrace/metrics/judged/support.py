"""The share of a text's statements that the retrieved contexts support: `faithfulness` checks the
answer's statements, `context_recall` the reference's; they differ only in the text and the wording."""

from __future__ import annotations

from typing import Any, ClassVar

from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.statements import extract, listed, point_at, verify
from groundtrace.record import Record


class ContextSupportShare(JudgeMetric):
    prompt_files = ("statements", "verify")
    source: ClassVar[str]  # the record field whose statements are checked
    source_name: ClassVar[str]  # how the prompt calls that text
    empty_reason: ClassVar[str]  # formatted with score=
    summary: ClassVar[str]  # formatted with kept=, total=
    missing_label: ClassVar[str]
    count_key: ClassVar[str]
    spans_label: ClassVar[str | None] = None  # set when the checked text is the answer

    def __init__(self, *, no_statements_score: float = 1.0, **options: Any) -> None:
        super().__init__(**options)
        self.no_statements_score = float(no_statements_score)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        text = getattr(record, self.source)
        statements = extract(run, text, name=self.source_name, question=record.question)
        if not statements:
            return Result(self.no_statements_score, self.empty_reason.format(score=self.no_statements_score),
                          details={"statements": []})
        checked = verify(run, statements, needed(record.contexts), evidence_name="retrieved context",
                         no_evidence_reason="no contexts were retrieved")
        missing = [c for c in checked if not c.supported]
        value = sum(c.support for c in checked) / len(checked)
        spans = point_at(text, checked, self.spans_label) if self.spans_label else []
        reason = self.summary.format(kept=len(checked) - len(missing), total=len(checked))
        if missing:
            reason += f"; {self.missing_label}: {listed(missing)}"
        return Result(value, reason, spans, {"statements": [c.as_dict() for c in checked],
                                             self.count_key: len(checked) - len(missing), "total": len(checked)})
