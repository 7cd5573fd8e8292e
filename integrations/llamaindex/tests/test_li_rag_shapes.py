"""Query and chat engines under the one definition of a turn: a similarity cut-off drops nodes that
the model never reads; condense_plus_context keeps the user's literal follow-up as the question and
the condensed question among the queries (condense_question too)."""

from __future__ import annotations

import asyncio
import math

import pytest
from agent_support import build_keyword_index
from li_support import ANSWER, CONTEXTS, DORM_EN, QUESTION, TOP_K, ScriptedLLM, assert_nothing_left, expected_nodes
from llama_index.core.postprocessor import SimilarityPostprocessor

QUESTION_EN = "What is the dormitory fee in rubles?"
FOLLOW_UP = "А в рублях за год?"
CONDENSED = "Сколько стоит общежитие СПбГУ за год, в рублях?"


def test_a_similarity_cutoff_keeps_only_the_nodes_above_it(instrumented, sink):
    # KeywordEmbedding scores, by hand: the question is (1, dormitory, fee, rubles) -> (1,1,1,1,0,0,0);
    # dorm-en adds "month": cos = 4 / (2 * sqrt(5)) = 0.894; dorm-ru and city-ru share only the constant:
    # 1 / 2 = 0.5; city-en (capital, paris): 1 / (2 * sqrt(3)) = 0.289. A cut-off of 0.6 keeps dorm-en.
    engine = build_keyword_index().as_query_engine(llm=ScriptedLLM(), similarity_top_k=4,
                                                   node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.6)])

    assert str(engine.query(QUESTION_EN)) == ANSWER

    assert instrumented.flush(10)
    [record] = sink.records
    assert (record.question, record.answer, record.contexts, record.queries) == (QUESTION_EN, ANSWER, [DORM_EN], None)
    assert record.metadata == {
        "nodes": [{"id": "dorm-en#0", "score": pytest.approx(4 / (2 * math.sqrt(5))),
                   "metadata": {"lang": "en", "source": "spbu.ru/en/dorm"}}],
        "unused_contexts": [{"kind": "document", "id": node_id} for node_id in ("city-ru#0", "dorm-ru#0", "city-en#0")],
    }
    assert_nothing_left()


@pytest.mark.parametrize(("mode", "follow_up_with"), [
    ("condense_plus_context", "chat"), ("condense_plus_context", "stream_chat"), ("condense_plus_context", "achat"),
    ("condense_question", "chat")])
def test_a_condensing_chat_keeps_the_follow_up_as_the_question_and_the_condensed_one_as_a_query(
        index, instrumented, sink, mode, follow_up_with):
    llm = ScriptedLLM(routes={"Standalone question": CONDENSED})  # both modes' condense prompts say so
    engine = index.as_chat_engine(chat_mode=mode, llm=llm, similarity_top_k=TOP_K)

    assert engine.chat(QUESTION).response == ANSWER  # turn 1: no history, nothing to condense
    if follow_up_with == "chat":
        answer = engine.chat(FOLLOW_UP).response
    elif follow_up_with == "stream_chat":
        answer = "".join(engine.stream_chat(FOLLOW_UP).response_gen)
    else:
        answer = asyncio.run(engine.achat(FOLLOW_UP)).response
    assert answer == ANSWER

    assert instrumented.flush(10)
    first, second = sink.records
    assert (first.question, first.queries, first.answer, first.contexts) == (QUESTION, None, ANSWER, CONTEXTS)
    assert (second.question, second.queries, second.answer, second.contexts) == (FOLLOW_UP, [CONDENSED], ANSWER, CONTEXTS)
    # the condensing call's output is no answer, and its input (the history) no context
    assert second.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert_nothing_left()
