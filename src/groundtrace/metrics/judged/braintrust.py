"""`factuality` and `numeric_rater` (Braintrust autoevals style).

factuality: the judge compares the answer with the reference ("expert") answer, reasons step by
step, and picks one of

    A  subset, consistent          0.5       B  superset, consistent       0
    C  same details                1         D  disagreement               0
    E  differs, but not in a way that matters for factuality               1

The choice scores are configurable (``choice_scores``); the defaults are the seed's set for
hallucination testing (a superset adds facts the expert did not state, so it scores 0). With n
samples the value is the mean choice score. Excerpts of the answer that the judge says disagree
or go beyond the reference become spans. Higher = more factual.

numeric_rater: a 1–10 rating by a criterion (``criteria``), with (``reasoning=True``, default)
or without step-by-step reasoning first; value = (rating − 1) / 9, mean over samples. The
rating's schema is the enum 1..10, so no reply can put a value outside [0, 1].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun, clip, mean
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.spans import locate

DEFAULT_CHOICE_SCORES = {"A": 0.5, "B": 0.0, "C": 1.0, "D": 0.0, "E": 1.0}
CHOICE_LABELS = {"A": "subset of the reference", "B": "superset of the reference", "C": "same details as the reference",
                 "D": "disagrees with the reference", "E": "differs in ways that do not matter"}


class FactualityVerdict(BaseModel):
    reasoning: str = Field(description="step-by-step reasoning, before the choice")
    choice: Literal["A", "B", "C", "D", "E"]
    answer_excerpts: list[str] = Field(max_length=20, description="verbatim excerpts of the submission that disagree or go beyond")


class Factuality(JudgeMetric):
    name = "factuality"
    description = "LLM judge (Braintrust): answer vs reference as A–E (subset, superset, same, disagree, immaterial)."
    requires = ("answer", "reference")
    higher_is_better = True
    default_threshold = 0.5  # with the default choice scores: B (superset) and D (disagreement) are flagged
    prompt_files = ("factuality",)

    def __init__(self, *, choice_scores: Mapping[str, float] | None = None, **options: Any) -> None:
        super().__init__(**options)
        scores = {**DEFAULT_CHOICE_SCORES, **{k.upper(): float(v) for k, v in (choice_scores or {}).items()}}
        if set(scores) != set(DEFAULT_CHOICE_SCORES) or not all(0.0 <= v <= 1.0 for v in scores.values()):
            raise ValueError(f"factuality: choice_scores maps A–E to values in [0, 1], got {choice_scores}")
        self.choice_scores = scores

    def judge(self, record: Record, run: JudgeRun) -> Result:
        answer = needed(record.answer)
        samples = run.ask("factuality", FactualityVerdict,
                          {"question": record.question, "expert": record.reference, "submission": answer}, sample=True)
        value = mean([self.choice_scores[s.choice] for s in samples])
        choice, _ = Counter(s.choice for s in samples).most_common(1)[0]
        spans = []
        if self.choice_scores[choice] < 1.0:
            label = "disagrees with reference" if choice == "D" else "beyond reference"
            for excerpt in dict.fromkeys(e for s in samples for e in s.answer_excerpts):
                where = locate(answer, excerpt)
                if where is not None:
                    spans.append(Span(start=where[0], end=where[1], text=answer[where[0]:where[1]], label=label))
        reason = f"({choice}) {CHOICE_LABELS[choice]}: {clip(samples[0].reasoning, 300)}"
        return Result(value, reason, spans, {
            "choice": choice, "choices": [s.choice for s in samples], "choice_scores": self.choice_scores,
            "reasoning": samples[0].reasoning, "answer_excerpts": samples[0].answer_excerpts,
        })


OneToTen = Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


class ReasonedRating(BaseModel):
    reasoning: str = Field(description="step-by-step reasoning, before the rating")
    rating: OneToTen


class Rating(BaseModel):
    rating: OneToTen

DEFAULT_CRITERIA = ("Is every claim of the answer supported by the contexts, and does it answer the question? "
                    "10: fully supported and answers the question; 1: contradicts the contexts or invents facts.")


class NumericRater(JudgeMetric):
    name = "numeric_rater"
    description = "LLM judge (Braintrust): a 1–10 rating by a criterion, mapped to (r − 1) / 9."
    requires = ("answer", "contexts")
    higher_is_better = True
    default_threshold = 0.5  # ratings 1–5 are flagged, 6–10 are not
    prompt_files = ("numeric_rater",)

    def __init__(self, *, criteria: str = DEFAULT_CRITERIA, reasoning: bool = True, **options: Any) -> None:
        super().__init__(**options)
        if not criteria.strip():
            raise ValueError("numeric_rater: criteria must say what to rate")
        self.criteria = criteria.strip()
        self.reasoning = bool(reasoning)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        schema: type[ReasonedRating | Rating] = ReasonedRating if self.reasoning else Rating
        shape = ('Think step by step first. Reply with JSON: {"reasoning": "...", "rating": 7}' if self.reasoning
                 else 'Reply with JSON: {"rating": 7}')
        samples = run.ask("numeric_rater", schema, {
            "question": record.question, "contexts": [c for c in needed(record.contexts) if c.strip()] or None,
            "reference": record.reference, "answer": record.answer,
        }, params={"criteria": self.criteria, "shape": shape}, sample=True)
        ratings = [s.rating for s in samples]
        value = mean([(r - 1) / 9 for r in ratings])
        reason = f"rated {mean(ratings):g}/10"
        details: dict[str, Any] = {"ratings": ratings, "criteria": self.criteria, "reasoning_asked": self.reasoning}
        first = samples[0]
        if isinstance(first, ReasonedRating):  # asked for its reasoning
            reason += f": {clip(first.reasoning, 300)}"
            details["reasoning"] = first.reasoning
        return Result(value, reason, [], details)
