"""LLM-as-judge metrics on any OpenAI-compatible endpoint (see :mod:`.base` for the options).

| metric              | needs                      | value                                              | direction   |
|---------------------|----------------------------|----------------------------------------------------|-------------|
| faithfulness        | answer, contexts           | supported answer statements / statements           | higher good |
| answer_relevance    | question, answer           | cos(generated questions, question) × committal     | higher good |
| context_relevance   | question, contexts         | relevant context sentences / sentences             | higher good |
| context_recall      | contexts, reference        | reference statements found in contexts / statements| higher good |
| answer_correctness  | answer, reference          | blend of TP/FP/FN F-score and similarity           | higher good |
| answer_completeness | answer, reference          | key-point coverage + information density           | higher good |
| hallucination       | answer, contexts           | (contradicted + unsupported) / statements × scale  | higher bad  |
| factuality          | answer, reference          | A–E choice score                                   | higher good |
| numeric_rater       | answer, contexts           | (rating − 1) / 9                                   | higher good |

A judge prompt is a file, ``groundtrace/metrics/prompts/NAME.txt``; :func:`render_prompt` turns one
into chat messages with the evaluated texts fenced as data. It is public for tools that ask a judge
for something other than a Score (``groundtrace synth-hallucinations``) and for custom judge metrics.
"""

from groundtrace.metrics.judged.base import JudgeMetric, JudgeRun
from groundtrace.metrics.judged.prompts import load as load_prompt
from groundtrace.metrics.judged.prompts import render as render_prompt

#: the judge metrics' registry names, in the order of the table above
JUDGE_METRICS = ("faithfulness", "answer_relevance", "context_relevance", "context_recall", "answer_correctness",
                 "answer_completeness", "hallucination", "factuality", "numeric_rater")

__all__ = ["JUDGE_METRICS", "JudgeMetric", "JudgeRun", "load_prompt", "render_prompt"]
