"""Score math of the nine judge metrics against a scripted judge on 127.0.0.1."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("openai")

from groundtrace.metrics.judged.completeness import density_components
from groundtrace.score import Score
from tests.conftest import TableEmbedder
from tests.judge.cases import METRICS, cases
from tests.judge.scripted import ScriptedJudge, Seq, statements, user_text, verdicts
from tests.loopback import Reply
from tests.test_judge_backend import completion


def run(record: dict, name: str, script: dict | None = None, **options) -> tuple[Score, ScriptedJudge]:
    default_script, default_options, _ = cases(record)[name]
    with ScriptedJudge(script or default_script) as judge:
        score = judge.metric(name, **{**default_options, **options}).score(record)
    return score, judge


@pytest.mark.parametrize("name", METRICS)
def test_every_metric_scores_the_scripted_verdicts(record, name):
    score, judge = run(record, name)
    expected = cases(record)[name][2]
    assert score.ok, score.error
    if expected is not None:
        assert score.value == pytest.approx(expected)
    assert score.reason and score.details["judge"]["mode"] == "json_schema"
    # the cost is the sum over every request: 100 prompt + 20 completion tokens each, at gpt-4o-mini prices
    requests = len(judge.requests)
    assert score.details["judge"]["requests"] == requests
    assert (score.cost.input_tokens, score.cost.output_tokens) == (100 * requests, 20 * requests)
    assert score.cost.usd == pytest.approx(requests * (100 * 0.15 + 20 * 0.60) / 1e6)
    assert all(body["temperature"] == 0.0 and body["max_tokens"] == 1024 for body in judge.bodies)


def test_faithfulness_statements_verdicts_and_spans(record):
    score, judge = run(record, "faithfulness")
    assert judge.steps() == ["Statements", "Verdicts"]
    assert score.value == 0.75 and score.hallucinated is False and score.threshold == 0.75
    assert score.reason == "3 of 4 statements are supported by the contexts; unsupported: “Tesla was founded in 2004”"
    [span] = score.spans
    assert (span.start, span.end, span.text, span.label) == (10, 25, "founded in 2004", "unsupported")
    assert record["answer"][span.start:span.end] == "founded in 2004"
    assert [s["verdict"] for s in score.details["statements"]] == [0, 1, 1, 1]
    # the verify step checks exactly the extracted statements against the fenced contexts
    verify = user_text(judge.bodies[1])
    assert "[1] Tesla was founded in 2004\n[2] Tesla was founded by Martin Eberhard" in verify
    assert "[1] Tesla was founded in 2003 by Martin Eberhard and Marc Tarpenning." in verify
    assert "exactly 4 verdicts" in verify
    schema = judge.bodies[1]["response_format"]["json_schema"]["schema"]["properties"]["verdicts"]
    assert (schema["minItems"], schema["maxItems"]) == (4, 4)


def test_faithfulness_without_statements_is_defined_not_nan(record):
    score, judge = run(record, "faithfulness", {"Statements": {"statements": []}})
    assert judge.steps() == ["Statements"]  # nothing to verify: no second call
    assert score.value == 1.0 and "no checkable statements" in score.reason
    score, _ = run(record, "faithfulness", {"Statements": {"statements": []}}, no_statements_score=0.0)
    assert score.value == 0.0


def test_faithfulness_without_contexts_marks_everything_unsupported(record):
    record["contexts"] = []
    score, judge = run(record, "faithfulness")
    assert judge.steps() == ["Statements"]
    assert score.value == 0.0 and score.details["statements"][0]["reason"] == "no contexts were retrieved"


def test_samples_average_the_verdicts(record):
    """n=3 samples: one request with n=3 at temperature 0.7; a statement's verdict is its mean."""
    def three_samples(body):
        return Reply(payload=completion(*(json.dumps(verdicts(*v)) for v in ((0, 1, 1, 1), (1, 1, 1, 1), (0, 1, 0, 1)))))

    score, judge = run(record, "faithfulness", {"Statements": cases(record)["faithfulness"][0]["Statements"],
                                                "Verdicts": three_samples}, n=3)
    verify = judge.bodies_of("Verdicts")[0]
    assert verify["n"] == 3 and verify["temperature"] == 0.7
    assert judge.bodies_of("Statements")[0]["temperature"] == 0.0 and "n" not in judge.bodies_of("Statements")[0]
    assert [s["verdict"] for s in score.details["statements"]] == pytest.approx([1 / 3, 1, 2 / 3, 1])
    assert score.value == pytest.approx((1 / 3 + 1 + 2 / 3 + 1) / 4)


def test_wrong_verdict_count_is_repaired(record):
    script = {"Statements": cases(record)["faithfulness"][0]["Statements"], "Verdicts": Seq([verdicts(1, 1), verdicts(0, 1, 1, 1)])}
    score, judge = run(record, "faithfulness", script)
    assert score.value == 0.75
    assert judge.steps() == ["Statements", "Verdicts", "Verdicts"]
    assert "at least 4 items" in judge.bodies[2]["messages"][-1]["content"]


def test_context_recall(record):
    score, judge = run(record, "context_recall")
    assert score.value == pytest.approx(2 / 3) and score.spans == []
    assert "(the reference answer)" in user_text(judge.bodies[0]) and record["reference"] in user_text(judge.bodies[0])
    assert score.reason.startswith("2 of 3 reference statements are found in the contexts; missing: “Tesla's CEO is Elon Musk”")


def test_hallucination_mastra_semantics(record):
    score, judge = run(record, "hallucination")
    assert score.value == pytest.approx(0.4) and score.higher_is_better is False and score.hallucinated is True
    assert score.reason.startswith("hallucination 0.40: 1 of 2 context statements contradicted, 1 of 3 answer claims unsupported")
    assert "contradicts “Tesla was founded in 2003 by Martin Eberhard and Marc Tarpenning.”" in score.reason
    labels = {(s.label, s.text) for s in score.spans}
    assert labels == {("contradiction", "founded in 2004"), ("unsupported", "founded in 2004 by Martin Eberhard")}
    body = judge.bodies_of("HallucinationVerdicts")[0]
    props = body["response_format"]["json_schema"]["schema"]["properties"]
    assert (props["context_verdicts"]["minItems"], props["claim_verdicts"]["maxItems"]) == (2, 3)
    assert "Speculative wording" in body["messages"][0]["content"]
    assert score.hallucination_score == pytest.approx(0.4)


def test_hallucination_scale_sentence_unit_and_empty_answer(record):
    script = cases(record)["hallucination"][0]
    score, _ = run(record, "hallucination", script, scale=0.5)
    assert score.value == pytest.approx(0.2)
    with pytest.raises(ValueError, match="scale"):
        run(record, "hallucination", script, scale=2)
    # three context sentences now: the schema asks for three context verdicts
    three = {**script["HallucinationVerdicts"], "context_verdicts": [*script["HallucinationVerdicts"]["context_verdicts"],
                                                                    {"reason": "-", "contradicted": 0, "answer_quote": ""}]}
    score, judge = run(record, "hallucination", {**script, "HallucinationVerdicts": three}, context_unit="sentence")
    assert score.value == pytest.approx(2 / 6) and score.details["total"] == 6
    record["answer"] = "  "
    score, judge = run(record, "hallucination", script)
    assert score.ok and score.value == 0.0 and judge.requests == [] and "empty" in score.reason


def test_answer_relevance_cosines_and_noncommittal_penalty(record):
    score, judge = run(record, "answer_relevance")
    assert score.value == pytest.approx(1.6 / 3)
    assert [q["cosine"] for q in score.details["questions"]] == pytest.approx([1.0, 0.6, 0.0])
    schema = judge.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["questions"]
    assert (schema["minItems"], schema["maxItems"]) == (3, 3)
    evasive = {"GeneratedQuestions": {"questions": ["When was Tesla founded?"] * 3, "noncommittal": 1}}
    score, _ = run(record, "answer_relevance", evasive)
    assert score.value == 0.0 and "noncommittal" in score.reason
    score, _ = run(record, "answer_relevance", evasive, noncommittal_penalty=0.5)
    assert score.value == pytest.approx(0.5)


def test_context_relevance_counts_only_sentences_of_the_contexts(record):
    score, _ = run(record, "context_relevance")
    assert score.value == pytest.approx(2 / 3) and score.details["sentences"] == 3
    assert score.details["not_in_context"] == ["Tesla was founded by Elon Musk."]
    assert "1 sentence(s) the judge quoted are in no context" in score.reason
    insufficient = {"RelevantSentences": {"sentences": [], "insufficient_information": 1}}
    score, _ = run(record, "context_relevance", insufficient)
    assert score.value == 0.0 and score.reason.startswith("insufficient information")


def test_answer_correctness_f_score_blended_with_similarity(record):
    score, judge = run(record, "answer_correctness")
    d = score.details
    assert (d["TP"], d["FP"], d["FN"]) == (1, 2, 2)
    assert d["f_score"] == pytest.approx(1 / 3) and d["similarity"] == pytest.approx(0.8)
    assert score.value == pytest.approx(0.5 / 3 + 0.4)
    assert sorted(judge.steps()) == ["Statements", "Statements", "Verdicts", "Verdicts"]
    # both FP statements are reported; only the one whose words are in the answer becomes a span
    assert [s["statement"] for s in d["answer_statements"] if s["verdict"] == 0] == [
        "Tesla was founded in 2004", "Tesla was founded by Martin Eberhard"]
    assert [s.text for s in score.spans] == ["founded in 2004"]
    score, _ = run(record, "answer_correctness", statement_weight=0.75, similarity_weight=0.25)
    assert score.value == pytest.approx(0.75 / 3 + 0.25 * 0.8)


def test_completeness_components():
    """answer "Paris is the capital of France." against reference "Paris is the capital.":
    answer terms paris is the capital of france (content: paris capital france) -> D = 3/6;
    reference content paris capital, both in the answer -> R = 1; K = min(1, 2/3)."""
    record = {"question": "What is Paris?", "answer": "Paris is the capital of France.", "reference": "Paris is the capital.",
              "contexts": [], "language": "en"}
    parts = density_components(record["answer"], record["reference"], "en")
    assert parts == pytest.approx({"term_recall": 1.0, "lexical_density": 0.5, "conciseness": 2 / 3, "density": (0.5 + 2 / 3) / 2})
    script = {"Statements": statements("Paris is a city", "Paris is the capital", "of a country", "in Europe"),
              "Verdicts": verdicts(1, 1, 1, 0)}
    with ScriptedJudge(script) as judge:
        score = judge.metric("answer_completeness").score(record)
        assert "key points of a reference answer" in judge.bodies[0]["messages"][0]["content"]
    assert score.details["coverage"] == 0.75
    assert score.value == pytest.approx(0.6 * 0.75 + 0.2 * 1.0 + 0.2 * (0.5 + 2 / 3) / 2)
    with ScriptedJudge(script) as judge:
        score = judge.metric("answer_completeness", coverage_weight=1, term_recall_weight=0, density_weight=0).score(record)
    assert score.value == 0.75


def test_completeness_in_chinese_uses_the_chinese_tokenizer():
    parts = density_components("北京是中国的首都。", "北京是首都。", "zh")
    # jieba: 北京 / 是 / 中国 / 的 / 首都; 是 and 的 are stopwords
    assert parts["lexical_density"] == pytest.approx(3 / 5) and parts["term_recall"] == 1.0
    assert parts["conciseness"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("choice, value", [("A", 0.5), ("B", 0.0), ("C", 1.0), ("D", 0.0), ("E", 1.0)])
def test_factuality_choice_scores(record, choice, value):
    reply = {"FactualityVerdict": {"reasoning": "step 1 ... step 2 ...", "choice": choice, "answer_excerpts": ["founded in 2004"]}}
    score, judge = run(record, "factuality", reply)
    assert score.value == value and score.details["choice"] == choice
    assert score.reason.startswith(f"({choice}) ")
    assert bool(score.spans) == (value < 1.0)
    props = judge.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert list(props) == ["reasoning", "choice", "answer_excerpts"]  # reasoning comes before the choice
    assert props["choice"]["enum"] == ["A", "B", "C", "D", "E"]


def test_factuality_choice_scores_are_configurable(record):
    reply = {"FactualityVerdict": {"reasoning": "superset", "choice": "B", "answer_excerpts": []}}
    score, _ = run(record, "factuality", reply, choice_scores={"B": 0.6, "a": 0.4})
    assert score.value == 0.6 and score.details["choice_scores"] == {"A": 0.4, "B": 0.6, "C": 1.0, "D": 0.0, "E": 1.0}
    with pytest.raises(ValueError, match="choice_scores"):
        run(record, "factuality", reply, choice_scores={"F": 1})


@pytest.mark.parametrize("reasoning", [True, False])
def test_numeric_rater_with_and_without_reasoning(record, reasoning):
    script = {"ReasonedRating": {"reasoning": "fine", "rating": 7}, "Rating": {"rating": 7}}
    score, judge = run(record, "numeric_rater", script, reasoning=reasoning)
    assert score.value == pytest.approx(6 / 9) and score.details["ratings"] == [7]
    [body] = judge.bodies
    properties = body["response_format"]["json_schema"]["schema"]["properties"]
    assert list(properties) == (["reasoning", "rating"] if reasoning else ["rating"])
    assert properties["rating"]["enum"] == list(range(1, 11))
    assert ("Think step by step" in user_text(body)) == reasoning


@pytest.mark.parametrize("rating, value", [(1, 0.0), (10, 1.0), (4, 1 / 3)])
def test_numeric_rater_mapping(record, rating, value):
    score, _ = run(record, "numeric_rater", {"ReasonedRating": {"reasoning": "-", "rating": rating}})
    assert score.value == pytest.approx(value) and math.isfinite(score.value)


def test_prompts_ask_for_the_input_language(record):
    record.update(language="ru", answer="Тесла основана в 2004 году.", question="Когда основана Тесла?")
    score, judge = run(record, "faithfulness", {"Statements": statements("Тесла основана в 2004 году"), "Verdicts": verdicts(0)})
    assert score.value == 0.0 and score.spans[0].text == "Тесла основана в 2004 году"
    assert "in Russian (русский), the language of the texts" in judge.bodies[0]["messages"][0]["content"]
    record.update(language=None, answer="特斯拉成立于2004年。")
    score, judge = run(record, "faithfulness", {"Statements": statements(("特斯拉成立于2004年", "成立于2004年")), "Verdicts": verdicts(0)})
    assert score.details["language"] == "zh" and "Chinese (中文)" in judge.bodies[0]["messages"][0]["content"]
    assert (score.spans[0].start, score.spans[0].end) == (3, 11)


def test_embedder_is_the_shared_backend_by_default(record):
    from groundtrace.backends.embedders import get_embedder
    from groundtrace.metrics import get_metric

    assert get_metric("answer_relevance").embedder is get_embedder("use")
    assert isinstance(get_metric("answer_correctness", embedder=TableEmbedder({})).embedder, TableEmbedder)


def test_a_judge_metric_takes_a_client_or_the_clients_own_keywords(record):
    from groundtrace.backends.judge import JudgeClient
    from groundtrace.metrics import get_metric

    options = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "x", "timeout_s": 5, "cache": False}
    metric = get_metric("faithfulness", n=3, max_tokens=64, threshold=0.4, **options)
    assert metric.client_options == options and (metric.n, metric.max_tokens, metric.threshold) == (3, 64, 0.4)
    assert metric.client is get_metric("hallucination", **options).client  # one client per configuration
    assert (metric.client.model, metric.client.timeout_s, metric.client.cache) == ("m", 5.0, None)

    with JudgeClient("m", base_url="http://127.0.0.1:9/v1", api_key="x", cache=False) as client:
        assert get_metric("faithfulness", client=client).client is client
        with pytest.raises(ValueError, match="either client= or the client's options"):
            get_metric("faithfulness", client=client, timeout_s=5)
