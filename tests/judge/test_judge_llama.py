"""All nine judge metrics end to end against a real llama.cpp server (SmolLM2-135M on 127.0.0.1).

The tiny model's verdicts are not expected to be right; the plumbing is: structured-output
detection against a real server (llama.cpp rejects json_schema and constrains json_object with a
schema by grammar), prompts, parsing, scores in [0, 1] or error Scores with a reason.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("openai")

from groundtrace.backends.judge import JudgeClient
from groundtrace.metrics import get_metric
from tests.judge.cases import METRICS
from groundtrace.testing.llama_server import LlamaServer

RECORDS = {
    "en": {
        "id": "en", "question": "When was the Eiffel Tower completed?",
        "contexts": ["The Eiffel Tower in Paris was completed in 1889. It is 330 metres tall."],
        "answer": "The Eiffel Tower was completed in 1889.",
        "reference": "It was completed in 1889.",
    },
    "ru": {
        "id": "ru", "question": "Когда построили Эйфелеву башню?",
        "contexts": ["Эйфелева башня в Париже построена в 1889 году. Её высота 330 метров."],
        "answer": "Эйфелева башня построена в 1889 году.",
        "reference": "В 1889 году.",
    },
    "zh": {
        "id": "zh", "question": "埃菲尔铁塔是哪一年建成的？",
        "contexts": ["巴黎的埃菲尔铁塔于1889年建成，高330米。"],
        "answer": "埃菲尔铁塔于1889年建成。",
        "reference": "1889年。",
    },
}


@pytest.fixture(scope="module")
def client(llama_server: LlamaServer):
    # one client for every metric: the structured-output mode is detected once and remembered
    with JudgeClient(llama_server.model, base_url=llama_server.url, cache=False, timeout_s=180, max_retries=1) as judge:
        yield judge


@pytest.fixture(scope="module")
def scores(client):
    """Each metric once on the English record (the tiny model takes seconds per call)."""
    return {name: get_metric(name, client=client, max_tokens=256).score(RECORDS["en"]) for name in METRICS}


def check(score) -> None:
    if score.ok:
        assert math.isfinite(score.value) and 0.0 <= score.value <= 1.0 and score.reason
        assert score.cost.input_tokens > 0 and score.cost.usd is None  # a local model has no price
        assert score.details["judge"]["mode"] == "json_object"
    else:
        assert score.value is None and score.error.startswith("judge error (") and score.reason == score.error
        # the model may fail to answer well; the plumbing (config, connection, HTTP) may not fail
        assert score.details["error_kind"] not in ("config", "connection", "http")


@pytest.mark.parametrize("name", METRICS)
def test_every_metric_end_to_end(scores, client, name):
    check(scores[name])
    # the real server rejects json_schema (with an HTTP 500); the client fell back to json_object
    assert client.mode == "json_object"


def test_the_tiny_model_gives_valid_structured_output(scores):
    """Grammar-constrained output parses: most metrics succeed (none would mean broken plumbing)."""
    assert sum(s.ok for s in scores.values()) >= 5, {n: s.error for n, s in scores.items() if not s.ok}


@pytest.mark.parametrize("language, name", [("ru", "faithfulness"), ("zh", "numeric_rater")])
def test_russian_and_chinese_records(client, language, name):
    score = get_metric(name, client=client, max_tokens=256).score(RECORDS[language])
    check(score)
    if score.ok:
        assert score.details["language"] == language


def test_environment_configuration_and_disk_cache(llama_server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.url)
    monkeypatch.setenv("GROUNDTRACE_JUDGE_MODEL", llama_server.model)
    monkeypatch.setenv("GROUNDTRACE_JUDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    metric = get_metric("numeric_rater", reasoning=False, max_tokens=32)
    first, second = metric.score(RECORDS["en"]), metric.score(RECORDS["en"])
    check(first)
    assert first.ok and second.value == first.value
    assert second.details["judge"]["cached"] == 1 and second.details["judge"]["requests"] == 0
