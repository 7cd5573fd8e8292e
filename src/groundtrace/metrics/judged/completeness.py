"""`answer_completeness` (答案完整性): how much of the reference's content the answer carries,
and how densely.

    coverage   C = key points of the reference that the answer covers / key points    (judge)
    term_recall R = distinct content terms of the reference found in the answer
                    / distinct content terms of the reference
    lexical_density D = content tokens of the answer / all its tokens
    conciseness K = min(1, content tokens of the reference / content tokens of the answer)
    density = (D + K) / 2
    value = (w_c·C + w_r·R + w_d·density) / (w_c + w_r + w_d)     weights 0.6 / 0.2 / 0.2

Tokens come from the language-aware tokenizer (jieba for Chinese; numbers in one canonical
form); content terms are tokens that are not stopwords of the language. Every component is
reported in details. Higher = more complete. A reference with no key points gives C = 1.
"""

from __future__ import annotations

from typing import Any

from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.statements import extract, listed, verify
from groundtrace.record import Record
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import terms


def density_components(answer: str, reference: str, language: str) -> dict[str, float]:
    """term_recall, lexical_density, conciseness and density (see the module doc)."""
    stop = stopwords(language)
    answer_terms = [t.text for t in terms(answer, language)]
    reference_terms = [t.text for t in terms(reference, language)]
    answer_content = [t for t in answer_terms if t not in stop]
    reference_content = [t for t in reference_terms if t not in stop]
    wanted = set(reference_content)
    term_recall = len(wanted & set(answer_content)) / len(wanted) if wanted else 1.0
    lexical_density = len(answer_content) / len(answer_terms) if answer_terms else 0.0
    conciseness = min(1.0, len(reference_content) / len(answer_content)) if answer_content else 0.0
    return {"term_recall": term_recall, "lexical_density": lexical_density, "conciseness": conciseness,
            "density": (lexical_density + conciseness) / 2}


class AnswerCompleteness(JudgeMetric):
    name = "answer_completeness"
    description = "LLM judge: key points of the reference covered by the answer, plus information density (needs a reference)."
    requires = ("answer", "reference")
    higher_is_better = True
    default_threshold = 0.5  # uncalibrated
    prompt_files = ("keypoints", "verify")

    def __init__(self, *, coverage_weight: float = 0.6, term_recall_weight: float = 0.2, density_weight: float = 0.2,
                 **options: Any) -> None:
        super().__init__(**options)
        self.weights = {"coverage": float(coverage_weight), "term_recall": float(term_recall_weight),
                        "density": float(density_weight)}
        if min(self.weights.values()) < 0 or sum(self.weights.values()) <= 0:
            raise ValueError("answer_completeness: the weights must be >= 0 and not all 0")

    def judge(self, record: Record, run: JudgeRun) -> Result:
        language = run.language
        answer, reference = needed(record.answer), needed(record.reference)
        keypoints = extract(run, reference, name="reference answer", question=record.question, prompt="keypoints")
        checked = verify(run, keypoints, [answer], evidence_name="answer to be graded")
        coverage = sum(c.support for c in checked) / len(checked) if checked else 1.0
        components = {"coverage": coverage, **density_components(answer, reference, language)}
        value = sum(self.weights[k] * components[k] for k in self.weights) / sum(self.weights.values())
        missing = [c for c in checked if not c.supported]
        reason = (f"covers {len(checked) - len(missing)} of {len(checked)} key points of the reference; "
                  f"term recall {components['term_recall']:.2f}, density {components['density']:.2f}")
        if missing:
            reason += f"; missing: {listed(missing)}"
        return Result(value, reason, [], {**components, "weights": self.weights,
                                          "keypoints": [c.as_dict() for c in checked]})
