"""`answer_relevance` and `context_relevance` (RAGAS).

answer_relevance: the judge writes ``questions`` (default 3) questions that the answer answers,
and says whether the answer is noncommittal; the embedder (the same one `facts` uses, ``use`` by
default) compares each with the user's question:

    value = clip(mean_i cos(q_i, question), 0, 1) × (1 − noncommittal_penalty × noncommittal)

``noncommittal`` is the share of samples that call the answer evasive; with the default penalty
1.0 an evasive answer scores 0, as in RAGAS. Higher = more relevant.

context_relevance: the judge copies, verbatim, the context sentences relevant to the question;
those that match a sentence of the contexts (split by the language-aware splitter) count:

    value = relevant context sentences / all context sentences          higher = more relevant

"Insufficient information" (the judge's flag, or no matching sentence) gives 0 with a reason.
A sentence the judge "copied" that is in no context is reported, never counted.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from groundtrace.backends.embedders import Embedder, get_embedder
from groundtrace.metrics.base import Result, needed
from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun, clip, mean
from groundtrace.metrics.judged.statements import fixed_lists
from groundtrace.record import Record
from groundtrace.text.sentences import split_sentences
from groundtrace.text.spans import normalised_text


# The shape of the reply; questions_schema fixes the count (no docstring: the judge would see it).
class GeneratedQuestions(BaseModel):
    questions: list[str]
    noncommittal: Literal[0, 1] = Field(description="1 if the answer is evasive, vague or noncommittal")


def questions_schema(count: int) -> type[GeneratedQuestions]:
    return fixed_lists(GeneratedQuestions, questions=count)


class AnswerRelevance(JudgeMetric):
    name = "answer_relevance"
    description = "LLM judge (RAGAS): questions generated from the answer, compared with the user's question."
    requires = ("question", "answer")
    higher_is_better = True
    default_threshold = 0.5  # uncalibrated: flagged when the answer's questions are far from the user's
    prompt_files = ("answer_relevance",)

    def __init__(self, *, questions: int = 3, noncommittal_penalty: float = 1.0,
                 embedder: str | Embedder | None = None, **options: Any) -> None:
        super().__init__(**options)
        if int(questions) < 1:
            raise ValueError(f"answer_relevance: questions must be at least 1, got {questions}")
        if not 0.0 <= float(noncommittal_penalty) <= 1.0:
            raise ValueError(f"answer_relevance: noncommittal_penalty must lie in [0, 1], got {noncommittal_penalty}")
        self.questions = int(questions)
        self.noncommittal_penalty = float(noncommittal_penalty)
        self._embedder_spec = embedder

    @property
    def embedder(self) -> Embedder:
        return get_embedder(self._embedder_spec)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        samples = run.ask("answer_relevance", questions_schema(self.questions), {"answer": record.answer},
                          params={"count": self.questions}, sample=True)
        generated = [q.strip() for s in samples for q in s.questions if q.strip()]
        noncommittal = mean([s.noncommittal for s in samples])
        vectors = self.embedder.embed([needed(record.question), *generated])
        cosines = [float(c) for c in vectors[1:] @ vectors[0]] if generated else []
        similarity = float(np.clip(mean(cosines), 0.0, 1.0))
        value = similarity * (1.0 - self.noncommittal_penalty * noncommittal)
        reason = f"the answer's own questions have mean cosine {similarity:.2f} to the user's question"
        if noncommittal:
            reason += f"; the judge found the answer noncommittal ({noncommittal:.0%} of samples), penalty {self.noncommittal_penalty:g}"
        return Result(value, reason, [], {
            "questions": [{"question": q, "cosine": round(c, 6)} for q, c in zip(generated, cosines, strict=True)],
            "similarity": similarity, "noncommittal": noncommittal, "embedder": self.embedder.name,
        })


class RelevantSentences(BaseModel):
    sentences: list[str] = Field(max_length=100, description="relevant context sentences, copied verbatim")
    insufficient_information: Literal[0, 1] = Field(description="1 if the contexts cannot answer the question")


class ContextRelevance(JudgeMetric):
    name = "context_relevance"
    description = "LLM judge (RAGAS): share of the context sentences relevant to the question."
    requires = ("question", "contexts")
    higher_is_better = True
    # Uncalibrated: even good retrieval holds few relevant sentences, so the bar is low.
    default_threshold = 0.2
    prompt_files = ("context_relevance",)

    def judge(self, record: Record, run: JudgeRun) -> Result:
        passages = [c for c in needed(record.contexts) if c.strip()]
        sentences = [s.text for p in passages for s in split_sentences(p)]
        if not sentences:
            return Result(0.0, "there are no context sentences: insufficient information", details={"sentences": 0})
        samples = run.ask("context_relevance", RelevantSentences, {"question": record.question, "contexts": passages},
                          sample=True)
        keys = [normalised_text(s) for s in sentences]
        ratios, flagged, relevant, invented = [], 0, set(), []
        for sample in samples:
            picked = {i for text in sample.sentences for i in _matches(normalised_text(text), keys)}
            invented += [t for t in sample.sentences if t.strip() and not _matches(normalised_text(t), keys)]
            if sample.insufficient_information:
                flagged += 1
                picked = set()
            relevant |= picked
            ratios.append(len(picked) / len(sentences))
        value = mean(ratios)
        if flagged == len(samples) or not relevant:
            reason = "insufficient information: the judge found no context sentence relevant to the question"
        else:
            reason = (f"{len(relevant)} of {len(sentences)} context sentences are relevant to the question, "
                      f"e.g. “{clip(sentences[min(relevant)])}”")
        if invented:
            reason += f"; {len(invented)} sentence(s) the judge quoted are in no context and were not counted"
        return Result(value, reason, [], {
            "relevant_sentences": [sentences[i] for i in sorted(relevant)], "sentences": len(sentences),
            "insufficient_information": flagged / len(samples), "not_in_context": invented[:20],
        })


def _matches(picked: str, keys: list[str]) -> list[int]:
    """The context sentences a quoted text stands for: those it contains, or the one that
    contains it, if it is at least half of that sentence (a quote cut short still counts)."""
    if len(picked) < 3:
        return []
    inside = [i for i, key in enumerate(keys) if key and key in picked]
    if inside:
        return inside
    return [i for i, key in enumerate(keys) if picked in key and len(picked) * 2 >= len(key)][:1]
