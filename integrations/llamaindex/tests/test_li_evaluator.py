"""GroundtraceEvaluator in LlamaIndex's own evaluation loop: a real VectorStoreIndex query engine (the
tests' index, a replay LLM) evaluated by BatchEvalRunner, and the evaluator called directly.

lexical by hand: retrieval gives the two dormitory passages (English, Russian). The faithful answer copies
the Russian one: BLEU 1 against it and 0 against the English one (B = 0.5), every keyword found (J = 1,
P = 0): 0.6·0.5 + 0.4·1 = 0.7. The baseless answer has none of its keywords in either passage and no
word in common with them: 0.0, with its three keywords as the flagged spans."""

from __future__ import annotations

from typing import Any

import pytest
from groundtrace_llamaindex import GroundtraceEvaluator
from li_support import ANSWER, CONTEXTS, QUESTION, TOP_K, ScriptedLLM
from llama_index.core.evaluation import BatchEvalRunner, EvaluationResult

BASELESS_QUESTION = "Кто живёт в саванне?"
BASELESS = "Zebras gallop quickly across savannas."
BASELESS_REASON = ("grounding 0.00: 0% of the answer's keywords occur in the contexts, BLEU 0.00; 3 keyword(s) not "
                   "found in any context: gallop, savannas, zebras")


class ReplayLLM(ScriptedLLM):
    """Answers each question with its recorded answer (found in the prompt's query line)."""

    answers: dict[str, str] = {}

    def _answer(self, prompt: str) -> str:
        return next(answer for question, answer in self.answers.items() if f"Query: {question}\n" in prompt)


@pytest.fixture
def engine(index):
    llm = ReplayLLM(answers={QUESTION: ANSWER, BASELESS_QUESTION: BASELESS})
    return index.as_query_engine(llm=llm, similarity_top_k=TOP_K)


def summary(result: EvaluationResult) -> tuple[Any, ...]:
    return result.query, result.response, result.contexts, result.score, result.passing, result.feedback


def test_batch_eval_runner_scores_every_answer_of_a_query_engine(engine) -> None:
    runner = BatchEvalRunner({"lexical": GroundtraceEvaluator("lexical")}, workers=2)

    results = runner.evaluate_queries(engine, queries=[QUESTION, BASELESS_QUESTION])

    faithful, baseless = results["lexical"]
    assert summary(faithful) == (QUESTION, ANSWER, CONTEXTS, pytest.approx(0.7), True,
                                 "grounding 0.70: 100% of the answer's keywords occur in the contexts, BLEU 0.50")
    assert summary(baseless) == (BASELESS_QUESTION, BASELESS, CONTEXTS, 0.0, False,
                                 BASELESS_REASON + '\nflagged text: "Zebras"; "gallop"; "savannas"')
    assert not faithful.invalid_result and not baseless.invalid_result


def test_evaluate_response_reads_the_answer_and_its_source_nodes(engine) -> None:
    response = engine.query(BASELESS_QUESTION)
    result = GroundtraceEvaluator("lexical").evaluate_response(query=BASELESS_QUESTION, response=response)
    assert summary(result)[:5] == (BASELESS_QUESTION, BASELESS, CONTEXTS, 0.0, False)


def test_evaluate_takes_plain_strings_and_metric_options() -> None:
    strict = GroundtraceEvaluator("lexical", threshold=0.8)
    result = strict.evaluate(query=QUESTION, response=ANSWER, contexts=CONTEXTS)
    assert (result.score, result.passing) == (pytest.approx(0.7), False)  # 0.7 < 0.8: flagged at this threshold


def test_an_answer_that_cannot_be_scored_is_an_invalid_result_with_the_reason() -> None:
    result = GroundtraceEvaluator("lexical").evaluate(query=QUESTION, response="  ", contexts=CONTEXTS)
    assert (result.invalid_result, result.score, result.passing) == (True, None, None)
    assert result.invalid_reason == "the answer is empty: there is no text to score (did the application return nothing?)"
    result = GroundtraceEvaluator("lexical").evaluate(query=QUESTION, response=ANSWER, contexts=[{"page": 1}])
    assert result.invalid_result and "contexts" in result.invalid_reason


def test_the_default_grounding_metric_gives_a_value_and_a_verdict_that_agree(engine) -> None:
    evaluator = GroundtraceEvaluator()
    runner = BatchEvalRunner({"grounding": evaluator}, workers=1)
    results = runner.evaluate_queries(engine, queries=[QUESTION, BASELESS_QUESTION])["grounding"]
    for result in results:
        assert 0.0 <= result.score <= 1.0
        assert result.passing == (result.score < evaluator.metric.threshold)  # higher = more hallucinated
        assert result.feedback
