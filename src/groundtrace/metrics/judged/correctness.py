"""`answer_correctness` (RAGAS): statement-level F-score against the reference, blended with the
semantic similarity of answer and reference.

    TP = answer statements the reference supports      FP = answer statements it does not
    FN = reference statements the answer does not cover
    F  = TP / (TP + 0.5 · (FP + FN))
    S  = clip(cos(embedding(answer), embedding(reference)), 0, 1)
    value = (w_f · F + w_s · S) / (w_f + w_s)     weights default 0.5 / 0.5 (the seed's)

Both statement lists are extracted, then both checked, two judge calls at a time. With no
statements on either side F is undefined and the value is S alone, with a reason. FP statements
become spans of the answer. Higher = more correct.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from groundtrace.backends.embedders import Embedder, get_embedder
from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.statements import extract, listed, point_at, verify
from groundtrace.record import Record


class AnswerCorrectness(JudgeMetric):
    name = "answer_correctness"
    description = "LLM judge (RAGAS): TP/FP/FN F-score against the reference, blended with similarity (needs a reference)."
    requires = ("answer", "reference")
    higher_is_better = True
    default_threshold = 0.5  # uncalibrated
    prompt_files = ("statements", "verify")

    def __init__(self, *, statement_weight: float = 0.5, similarity_weight: float = 0.5,
                 embedder: str | Embedder | None = None, **options: Any) -> None:
        super().__init__(**options)
        if statement_weight < 0 or similarity_weight < 0 or statement_weight + similarity_weight <= 0:
            raise ValueError("answer_correctness: the weights must be >= 0 and not both 0")
        self.statement_weight = float(statement_weight)
        self.similarity_weight = float(similarity_weight)
        self._embedder_spec = embedder

    @property
    def embedder(self) -> Embedder:
        return get_embedder(self._embedder_spec)

    def similarity(self, answer: str, reference: str) -> float:
        vectors = self.embedder.embed([answer, reference])
        return float(np.clip(vectors[1] @ vectors[0], 0.0, 1.0))

    def judge(self, record: Record, run: JudgeRun) -> Result:
        answer, reference, question = needed(record.answer), needed(record.reference), record.question
        answer_statements, reference_statements = run.parallel(
            lambda: extract(run, answer, name="answer", question=question),
            lambda: extract(run, reference, name="reference answer", question=question),
        )
        in_reference, in_answer = run.parallel(
            lambda: verify(run, answer_statements, [reference], evidence_name="reference answer"),
            lambda: verify(run, reference_statements, [answer], evidence_name="answer to be graded"),
        )
        tp = sum(c.support for c in in_reference)
        fp = len(in_reference) - tp
        fn = sum(1.0 - c.support for c in in_answer)
        f = tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn > 0 else None
        s = self.similarity(answer, reference)
        if f is None:
            value = s
            reason = f"no statements on either side, so only the similarity to the reference counts ({s:.2f})"
        else:
            value = (self.statement_weight * f + self.similarity_weight * s) / (self.statement_weight + self.similarity_weight)
            reason = (f"F {f:.2f} (TP {tp:g}, FP {fp:g}, FN {fn:g}) and similarity {s:.2f}, weighted "
                      f"{self.statement_weight:g}/{self.similarity_weight:g}")
        false_positives = [c for c in in_reference if not c.supported]
        missing = [c for c in in_answer if not c.supported]
        if false_positives:
            reason += f"; not in the reference: {listed(false_positives)}"
        if missing:
            reason += f"; missing from the answer: {listed(missing)}"
        spans = point_at(answer, in_reference, "not in reference")
        return Result(value, reason, spans, {
            "TP": tp, "FP": fp, "FN": fn, "f_score": f, "similarity": s,
            "weights": {"statements": self.statement_weight, "similarity": self.similarity_weight},
            "answer_statements": [c.as_dict() for c in in_reference],
            "reference_statements": [c.as_dict() for c in in_answer], "embedder": self.embedder.name,
        })
