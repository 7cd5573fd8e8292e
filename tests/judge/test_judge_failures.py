"""Every failure of the judge ends as a recorded error Score with a reason, or as the right score
after a retry: never NaN, never an exception in the caller."""

from __future__ import annotations

import math
import time

import pytest

pytest.importorskip("openai")

from groundtrace.metrics import get_metric
from groundtrace.score import Score
from tests.judge.cases import METRICS, cases
from tests.judge.scripted import ScriptedJudge, Seq
from tests.loopback import Reply

# answer_correctness extracts the statements of the answer and of the reference at once
FIRST_CALLS = {"answer_correctness": 2}
RATE_LIMITED = Reply(429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}}, headers={"Retry-After": "0"})
FAILING = Reply(500, {"error": {"message": "internal error"}})


def score_with(record: dict, name: str, script: dict, client_options: dict | None = None) -> tuple[Score, ScriptedJudge]:
    _, options, _ = cases(record)[name]
    with ScriptedJudge(script) as judge:
        score = judge.metric(name, client_options, **options).score(record)
    return score, judge


def every_step(entry) -> dict:
    """A script that answers every step of every metric with ``entry``."""
    steps = ["Statements", "Verdicts", "HallucinationVerdicts", "GeneratedQuestions", "RelevantSentences",
             "FactualityVerdict", "ReasonedRating", "Rating"]
    return {step: entry for step in steps}


def assert_error(score: Score, kind: str, *words: str) -> None:
    assert score.value is None and score.hallucinated is None and not score.ok
    assert score.error and score.reason == score.error and score.error.startswith(f"judge error ({kind}): ")
    assert score.details["error_kind"] == kind
    for word in words:
        assert word in score.error
    assert score.cost is not None  # what the failed requests cost is still accounted for


@pytest.mark.parametrize("name", METRICS)
def test_malformed_json_after_one_repair_is_an_error_score(record, name):
    score, judge = score_with(record, name, every_step('{"statements": [{"statement": "Tesla was'))
    assert_error(score, "parse", "not valid JSON", "even after one repair request")
    assert len(judge.requests) == 2 * FIRST_CALLS.get(name, 1)  # the reply and its one repair


@pytest.mark.parametrize("name", METRICS)
def test_missing_fields_are_an_error_score_naming_them(record, name):
    score, _ = score_with(record, name, every_step({"unrelated": 1}))
    assert_error(score, "validation", "missing field(s)")


@pytest.mark.parametrize("name", METRICS)
def test_429_then_success_gives_the_right_score(record, name):
    script, _, _ = cases(record)[name]
    clean, _ = score_with(record, name, script)
    retried, judge = score_with(record, name, {step: Seq([RATE_LIMITED, entry]) for step, entry in script.items()})
    assert retried.ok and retried.value == pytest.approx(clean.value) and retried.reason == clean.reason
    assert [r.json for r in judge.requests if r.number == 0]  # the first request was the 429
    assert retried.details["judge"]["requests"] == clean.details["judge"]["requests"] + len(script)


@pytest.mark.parametrize("name", METRICS)
def test_500_after_the_retries_is_an_error_score(record, name):
    score, judge = score_with(record, name, every_step(FAILING))
    assert_error(score, "server", "HTTP 500 after 2 retries", "internal error")
    assert len(judge.requests) == 3 * FIRST_CALLS.get(name, 1)


@pytest.mark.parametrize("name", METRICS)
def test_a_reply_slower_than_the_timeout_is_an_error_score_in_bounded_time(record, name):
    slow = Reply(payload={}, delay_s=5.0)
    started = time.perf_counter()
    score, _ = score_with(record, name, every_step(slow), {"timeout_s": 0.3, "max_retries": 1})
    assert_error(score, "timeout", "did not answer within 0.3 s")
    assert time.perf_counter() - started < 4.0


def test_a_slow_reply_then_a_fast_one_gives_the_right_score(record):
    script, _, expected = cases(record)["numeric_rater"]
    slow_then_fast = {"ReasonedRating": Seq([Reply(payload={}, delay_s=5.0), script["ReasonedRating"]])}
    score, judge = score_with(record, "numeric_rater", slow_then_fast, {"timeout_s": 0.3, "max_retries": 1})
    assert score.ok and score.value == pytest.approx(expected) and len(judge.requests) == 2


@pytest.mark.parametrize("name", METRICS)
def test_refusal_text_is_an_error_score(record, name):
    score, judge = score_with(record, name, every_step("I'm sorry, but I can't help with evaluating this text."))
    assert_error(score, "refusal", "refused")
    assert len(judge.requests) == FIRST_CALLS.get(name, 1)  # a refusal is not repaired


def test_refusal_after_a_successful_step_keeps_the_cost_of_that_step(record):
    script, _, _ = cases(record)["faithfulness"]
    score, _ = score_with(record, "faithfulness", {**script, "Verdicts": "I cannot do that."})
    assert_error(score, "refusal")
    # the statements step's tokens; the refused request's own usage does not travel with JudgeError
    assert score.cost.input_tokens == 100 and [c["prompt"] for c in score.details["judge"]["calls"]] == ["statements"]


def test_no_server_is_an_error_score(record):
    metric = get_metric("faithfulness", base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0, cache=False)
    score = metric.score(record)
    assert_error(score, "connection", "is the server running")


def test_missing_api_key_for_openai_is_an_error_score(record, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    score = get_metric("numeric_rater", cache=False).score(record)
    assert_error(score, "config", "OPENAI_API_KEY")


@pytest.mark.parametrize("name", METRICS)
def test_missing_inputs_are_error_scores_before_any_request(record, name):
    needs = get_metric(name).requires
    for field in needs:
        broken = {**record, field: None}
        with ScriptedJudge({}) as judge:
            score = judge.metric(name).score(broken)
        assert score.error and f"no '{field}'" in score.error and judge.requests == []


@pytest.mark.parametrize("name", METRICS)
def test_scores_are_never_nan_and_async_scoring_works(record, name):
    import asyncio

    script, options, _ = cases(record)[name]
    with ScriptedJudge(script) as judge:
        score = asyncio.run(judge.metric(name, **options).ascore(record))
    assert score.ok and math.isfinite(score.value) and 0.0 <= score.value <= 1.0


def test_a_500_that_rejects_response_format_falls_back_like_llama_cpp_python(record):
    """llama-cpp-python's server answers json_schema with HTTP 500 and a validation message naming
    response_format (seen against the real server): that is a format rejection, not an outage."""
    script, _, expected = cases(record)["numeric_rater"]
    rejected = Reply(500, {"error": {"message": "1 validation error: ('body', 'response_format', 'type'): Input should be "
                                                "'text' or 'json_object'", "type": "internal_server_error"}})

    def llama_like(body):
        return rejected if body["response_format"]["type"] == "json_schema" else script["ReasonedRating"]

    score, judge = score_with(record, "numeric_rater", {"ReasonedRating": llama_like})
    assert score.ok and score.value == pytest.approx(expected)
    assert [b["response_format"]["type"] for b in judge.bodies] == ["json_schema", "json_object"]
    assert score.details["judge"]["mode"] == "json_object"


def test_raw_newlines_inside_json_strings_are_read(record):
    """llama.cpp's grammar lets a model put a raw newline inside a JSON string (seen with SmolLM2):
    the reply is still the object, not the first bracketed piece of its text."""
    reply = '{ "reasoning": "[2] The answer is supported;\n3) the year matches.\n" ,"rating": 7}'
    score, judge = score_with(record, "numeric_rater", {"ReasonedRating": reply})
    assert score.ok and score.value == pytest.approx(6 / 9) and len(judge.requests) == 1
    assert score.details["reasoning"] == "[2] The answer is supported;\n3) the year matches.\n"
