"""One scripted judge conversation per metric on the Tesla record, with the value computed by hand.

    faithfulness        3 of 4 statements supported                       = 0.75
    context_recall      2 of 3 reference statements in the contexts       = 2/3
    hallucination       1 contradicted passage + 1 unsupported claim, of 2 passages + 3 claims = 2/5
    answer_relevance    cosines 1, 0.6, 0 to the question, committal     = 1.6/3
    context_relevance   2 of 3 context sentences (a third "copy" is in no context) = 2/3
    answer_correctness  TP 1, FP 2, FN 2: F = 1/(1 + 0.5·4) = 1/3; similarity 0.8; 0.5/0.5 = 0.5/3 + 0.4
    answer_completeness see test_completeness_components (here: 3 of 4 key points and the density terms)
    factuality          D (disagreement)                                  = 0
    numeric_rater       7                                                 = 6/9
"""

from __future__ import annotations

from typing import Any

from groundtrace.metrics.judged import JUDGE_METRICS
from tests.conftest import TableEmbedder
from tests.judge.scripted import statements, user_text, verdicts

ANSWER_STATEMENTS = statements(
    ("Tesla was founded in 2004", "founded in 2004"),
    "Tesla was founded by Martin Eberhard",
    ("Tesla is based in Austin", "It is based in Austin"),
    ("Tesla may be the largest carmaker", "It may be the largest carmaker"),
)
REFERENCE_STATEMENTS = statements("Tesla was founded in 2003", "Tesla is based in Austin, Texas", "Tesla's CEO is Elon Musk")
QUESTION_VECTOR = [1.0, 0.0]


def embedder(record: dict[str, Any]) -> TableEmbedder:
    return TableEmbedder({
        record["question"]: QUESTION_VECTOR,
        "When was Tesla founded?": [1.0, 0.0],
        "Who founded Tesla?": [0.6, 0.8],
        "What is the largest carmaker?": [0.0, 1.0],
        record["answer"]: [1.0, 0.0],
        record["reference"]: [0.8, 0.6],
    })


def _by_text(record: dict[str, Any], for_answer: Any, for_reference: Any):
    """A reply chosen by which text the step's "text" block holds."""
    return lambda body: for_answer if record["answer"] in user_text(body) else for_reference


def _by_evidence(for_answer_statements: Any, for_reference_statements: Any):
    return lambda body: (for_answer_statements if "is the reference answer" in user_text(body) else for_reference_statements)


def cases(record: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any], float]]:
    """metric -> (script, metric options, expected value)."""
    correctness_statements = statements(("Tesla was founded in 2004", "founded in 2004"), "Tesla was founded by Martin Eberhard",
                                        "Tesla is based in Austin")
    return {
        "faithfulness": ({"Statements": ANSWER_STATEMENTS, "Verdicts": verdicts(0, 1, 1, 1)}, {}, 0.75),
        "context_recall": ({"Statements": REFERENCE_STATEMENTS, "Verdicts": verdicts(1, 1, 0)}, {}, 2 / 3),
        "hallucination": ({
            "Statements": statements(("Tesla was founded in 2004 by Martin Eberhard", "founded in 2004 by Martin Eberhard"),
                                     "Tesla is based in Austin", ("Tesla may be the largest carmaker", "It may be the largest carmaker")),
            "HallucinationVerdicts": {
                "context_verdicts": [
                    {"reason": "the answer says 2004, the context 2003", "contradicted": 1, "answer_quote": "founded in 2004"},
                    {"reason": "consistent", "contradicted": 0, "answer_quote": ""},
                ],
                "claim_verdicts": [
                    {"reason": "the year is wrong", "supported": 0},
                    {"reason": "stated", "supported": 1},
                    {"reason": "speculative wording", "supported": 1},
                ],
            },
        }, {}, 2 / 5),
        "answer_relevance": ({"GeneratedQuestions": {
            "questions": ["When was Tesla founded?", "Who founded Tesla?", "What is the largest carmaker?"], "noncommittal": 0,
        }}, {"embedder": embedder(record)}, 1.6 / 3),
        "context_relevance": ({"RelevantSentences": {
            "sentences": ["Tesla was founded in 2003 by Martin Eberhard and Marc Tarpenning.",
                          "The company is based in Austin, Texas.", "Tesla was founded by Elon Musk."],
            "insufficient_information": 0,
        }}, {}, 2 / 3),
        "answer_correctness": ({
            "Statements": _by_text(record, correctness_statements, REFERENCE_STATEMENTS),
            "Verdicts": _by_evidence(verdicts(0, 0, 1), verdicts(0, 1, 0)),
        }, {"embedder": embedder(record)}, 0.5 * (1 / 3) + 0.5 * 0.8),
        "answer_completeness": ({
            "Statements": statements("founded in 2003", "based in Austin", "based in Texas", "CEO is Elon Musk"),
            "Verdicts": verdicts(1, 1, 1, 0),
        }, {}, None),  # the density terms: see test_completeness_components
        "factuality": ({"FactualityVerdict": {
            "reasoning": "The expert says 2003, the submission 2004: they disagree.", "choice": "D",
            "answer_excerpts": ["founded in 2004"],
        }}, {}, 0.0),
        "numeric_rater": ({"ReasonedRating": {"reasoning": "mostly supported, one wrong year", "rating": 7}}, {}, 6 / 9),
    }


METRICS = list(JUDGE_METRICS)
