"""The judge backend against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, Field

pytest.importorskip("openai")

from groundtrace.backends.judge import (
    DEFAULT_PRICES,
    JudgeClient,
    JudgeError,
    Price,
    extract_json,
    strict_schema,
)
from tests.loopback import LoopbackServer, Reply, Request


class Verdict(BaseModel):
    score: float = Field(ge=0, le=1)
    reason: str


SCHEMA = strict_schema(Verdict)
MESSAGES = [
    {"role": "system", "content": "You grade answers."},
    {"role": "user", "content": "Is 'Paris' supported by 'Paris is the capital of France'?"},
]
GOOD = '{"score": 0.9, "reason": "stated in the context"}'


def completion(*contents: str | None, model: str = "gpt-4o-mini", prompt_tokens: int = 100, completion_tokens: int = 20,
               finish_reason: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": c, "refusal": refusal}, "logprobs": None, "finish_reason": finish_reason}
            for i, c in enumerate(contents)
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


def ok(*contents: str, **kw: Any) -> Reply:
    return Reply(payload=completion(*contents, **kw))


def bad_request(message: str) -> Reply:
    return Reply(400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}})


class ScriptedServer(LoopbackServer):
    """POST /v1/chat/completions answered by ``respond(body, index)``, index counting requests."""

    def __init__(self, respond: Callable[[dict[str, Any], int], Reply]) -> None:
        def route(request: Request) -> Reply:
            if request.path != "/v1/chat/completions":
                return Reply(404, {"error": {"message": "not found"}})
            return respond(request.json, request.number)

        super().__init__(route)
        self.url = f"{self.url}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests]


def client(server: ScriptedServer, **kw: Any) -> JudgeClient:
    kw.setdefault("cache", False)
    kw.setdefault("backoff_s", 0.01)
    return JudgeClient(kw.pop("model", "gpt-4o-mini"), base_url=server.url, api_key="sk-test", **kw)


def json_schema_payload(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": MESSAGES,
        "temperature": 0.0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": SCHEMA, "strict": True}},
        **extra,
    }


# ------------------------------------------------------------------------------ structured output


def test_strict_schema_closes_objects_and_requires_every_field():
    class Inner(BaseModel):
        quote: str
        start: int = 0

    class Outer(BaseModel):
        verdict: Verdict
        spans: list[Inner] = []

    schema = strict_schema(Outer)
    assert schema["additionalProperties"] is False and schema["required"] == ["verdict", "spans"]
    for definition in schema["$defs"].values():
        assert definition["additionalProperties"] is False
        assert definition["required"] == list(definition["properties"])
    assert "default" not in json.dumps(schema)


def test_json_schema_accepted_exact_payload_result_and_cost():
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        judge = client(server)
        result = judge.complete(MESSAGES, Verdict)
    assert server.bodies == [json_schema_payload()]
    assert result.mode == "json_schema" == judge.mode
    assert result.parsed == [Verdict(score=0.9, reason="stated in the context")] and result.value.score == 0.9
    assert result.raw == [GOOD] and result.cached is False and result.requests == 1 and result.latency_ms > 0
    assert result.cost.input_tokens == 100 and result.cost.output_tokens == 20
    assert result.cost.usd == pytest.approx((100 * 0.15 + 20 * 0.60) / 1e6)


def test_llama_cpp_like_server_falls_back_to_json_object_and_remembers_it():
    def respond(body: dict[str, Any], i: int) -> Reply:
        if body.get("response_format", {}).get("type") == "json_schema":
            return bad_request('"response_format" must be one of "text" or "json_object", but got: json_schema')
        return ok(GOOD, model="llama")

    with ScriptedServer(respond) as server:
        judge = client(server)
        first = judge.complete(MESSAGES, Verdict)
        second = judge.complete(MESSAGES, Verdict)
    json_object = {"model": "gpt-4o-mini", "messages": MESSAGES, "temperature": 0.0,
                   "response_format": {"type": "json_object", "schema": SCHEMA}}
    assert server.bodies == [json_schema_payload(), json_object, json_object]
    assert first.mode == second.mode == judge.mode == "json_object"
    assert first.requests == 2 and second.requests == 1
    assert first.value == second.value == Verdict(score=0.9, reason="stated in the context")


@pytest.mark.parametrize(
    "reply",
    [
        "Here is my verdict:\n```json\n" + GOOD + "\n```\nHope this helps!",
        "Sure. " + GOOD + " That is all.",
        '<think>the context says {so} much</think>\n{"score": 0.9, "reason": "stated in the context",}',
    ],
    ids=["fenced", "prose-around", "think-and-trailing-comma"],
)
def test_server_accepting_neither_format_uses_text_mode_with_tolerant_extraction(reply: str):
    def respond(body: dict[str, Any], i: int) -> Reply:
        if "response_format" in body:
            return bad_request("unknown field: response_format")
        return ok(reply)

    with ScriptedServer(respond) as server:
        judge = client(server)
        first = judge.complete(MESSAGES, Verdict)
        second = judge.complete(MESSAGES, Verdict)
    kinds = [b.get("response_format", {}).get("type") for b in server.bodies]
    assert kinds == ["json_schema", "json_object", None, None]
    text_body = server.bodies[2]
    assert text_body["messages"][0] == MESSAGES[0]
    assert text_body["messages"][1]["content"].startswith(MESSAGES[1]["content"])
    assert json.dumps(SCHEMA) in text_body["messages"][1]["content"]
    assert first.mode == second.mode == "text" and second.requests == 1
    assert first.value == Verdict(score=0.9, reason="stated in the context")


def test_forced_mode_skips_detection():
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        client(server, mode="json_object").complete(MESSAGES, Verdict)
    assert server.bodies[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_other_client_errors_are_not_mistaken_for_format_rejection():
    with ScriptedServer(lambda body, i: Reply(401, {"error": {"message": "Incorrect API key provided"}})) as server, pytest.raises(JudgeError, match="HTTP 401.*OPENAI_API_KEY.*Incorrect API key") as info:
        client(server).complete(MESSAGES, Verdict)
    assert len(server.requests) == 1 and info.value.status == 401 and info.value.kind == "http"


# -------------------------------------------------------------------------------- repair, errors


def test_malformed_json_is_repaired_with_one_retry():
    replies = iter(['{"score": 0.9, "reason": "stated', GOOD])
    with ScriptedServer(lambda body, i: ok(next(replies))) as server:
        result = client(server).complete(MESSAGES, Verdict)
    assert result.value == Verdict(score=0.9, reason="stated in the context")
    assert len(server.requests) == 2 and result.requests == 2
    repair = server.bodies[1]["messages"]
    assert repair[:2] == MESSAGES
    assert repair[2] == {"role": "assistant", "content": '{"score": 0.9, "reason": "stated'}
    assert repair[3]["role"] == "user" and "only the JSON object" in repair[3]["content"]
    assert result.cost.input_tokens == 200 and result.cost.output_tokens == 40  # both requests are paid for


def test_output_that_never_parses_is_a_judge_error():
    with ScriptedServer(lambda body, i: ok("The answer looks fine to me.")) as server, pytest.raises(JudgeError, match="not valid JSON.*even after one repair") as info:
        client(server).complete(MESSAGES, Verdict)
    assert info.value.kind == "parse" and len(server.requests) == 2


def test_missing_fields_raise_a_judge_error_naming_them():
    with ScriptedServer(lambda body, i: ok('{"verdict": "supported"}')) as server, pytest.raises(JudgeError) as info:
        client(server).complete(MESSAGES, Verdict)
    message = str(info.value)
    assert info.value.kind == "validation"
    assert "missing field(s) 'score', 'reason'" in message and "Verdict" in message
    assert len(server.requests) == 2  # one repair was tried


def test_out_of_range_value_is_a_validation_error():
    with ScriptedServer(lambda body, i: ok('{"score": 7, "reason": "x"}')) as server, pytest.raises(JudgeError, match="score: Input should be less than or equal to 1"):
        client(server).complete(MESSAGES, Verdict)


@pytest.mark.parametrize("reply", ["I'm sorry, I can't help with that.", "I cannot assist with this request."])
def test_refusal_text_is_a_judge_error(reply: str):
    with ScriptedServer(lambda body, i: ok(reply)) as server, pytest.raises(JudgeError, match="refused") as info:
        client(server).complete(MESSAGES, Verdict)
    assert info.value.kind == "refusal" and len(server.requests) == 1


def test_refusal_field_is_a_judge_error():
    with ScriptedServer(lambda body, i: Reply(payload=completion(None, refusal="I can't help with that."))) as server, pytest.raises(JudgeError, match="refused.*can't help"):
        client(server).complete(MESSAGES, Verdict)


# -------------------------------------------------------------------------------------- retries


def test_429_with_retry_after_zero_then_success():
    def respond(body: dict[str, Any], i: int) -> Reply:
        if i == 0:
            return Reply(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "0"})
        return ok(GOOD)

    with ScriptedServer(respond) as server:
        started = time.perf_counter()
        result = client(server, backoff_s=30.0).complete(MESSAGES, Verdict)  # Retry-After wins over backoff
    assert time.perf_counter() - started < 10.0  # not the 30 s backoff
    assert result.value.score == 0.9 and result.requests == 2 and len(server.requests) == 2


def test_500_then_success():
    replies = iter([Reply(500, {"error": {"message": "boom"}}), ok(GOOD)])
    with ScriptedServer(lambda body, i: next(replies)) as server:
        result = client(server).complete(MESSAGES, Verdict)
    assert result.value.score == 0.9 and result.requests == 2


def test_500_forever_gives_a_judge_error_after_max_retries():
    with ScriptedServer(lambda body, i: Reply(503, {"error": {"message": "overloaded"}})) as server, pytest.raises(JudgeError, match="HTTP 503 after 2 retries.*overloaded") as info:
        client(server, max_retries=2).complete(MESSAGES, Verdict)
    assert len(server.requests) == 3 and info.value.kind == "server" and info.value.status == 503


def test_a_slow_server_times_out_within_a_bounded_time():
    with ScriptedServer(lambda body, i: Reply(payload=completion(GOOD), delay_s=5.0)) as server:
        started = time.perf_counter()
        with pytest.raises(JudgeError, match="did not answer within 0.3 s, 2 time") as info:
            client(server, timeout_s=0.3, max_retries=1).complete(MESSAGES, Verdict)
        elapsed = time.perf_counter() - started
    assert info.value.kind == "timeout" and len(server.requests) == 2
    assert elapsed < 4.0  # 2 x 0.3 s plus a 0.01 s backoff, not the server's 5 s


def test_server_down_is_a_judge_error_saying_so():
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        url = server.url
    judge = JudgeClient("m", base_url=url, cache=False, max_retries=1, backoff_s=0.01)
    with pytest.raises(JudgeError, match="could not connect.*is the server running") as info:
        judge.complete(MESSAGES, Verdict)
    assert info.value.kind == "connection"


# ---------------------------------------------------------------------------------------- cache


def test_cache_hits_misses_and_can_be_disabled(tmp_path):
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        judge = client(server, cache=True, cache_dir=tmp_path)
        first = judge.complete(MESSAGES, Verdict)
        second = judge.complete(MESSAGES, Verdict)
        assert len(server.requests) == 1
        assert first.cached is False and second.cached is True and second.requests == 0
        assert second.parsed == first.parsed and second.raw == first.raw and second.mode == "json_schema"
        assert second.cost == first.cost

        judge.complete(MESSAGES, Verdict, temperature=0.7)  # different params: a new request
        assert len(server.requests) == 2
        judge.complete(MESSAGES[:1] + [{"role": "user", "content": "another question"}], Verdict)
        assert len(server.requests) == 3

        reopened = client(server, cache=True, cache_dir=tmp_path)  # on disk: a new client hits it
        assert reopened.complete(MESSAGES, Verdict).cached is True
        assert len(server.requests) == 3

        uncached = client(server, cache=False)
        uncached.complete(MESSAGES, Verdict)
        uncached.complete(MESSAGES, Verdict)
        assert len(server.requests) == 5
    assert (tmp_path / "judge.sqlite3").exists()


def test_cache_is_safe_across_threads(tmp_path):
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        judge = client(server, cache=True, cache_dir=tmp_path, concurrency=4)
        questions = [[{"role": "user", "content": f"question {k % 5}"}] for k in range(40)]
        errors: list[BaseException] = []

        def work(messages: list[dict[str, str]]) -> None:
            try:
                judge.complete(messages, Verdict)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(q,)) for q in questions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert all(judge.complete(q, Verdict).cached for q in questions[:5])


# ----------------------------------------------------------------------------------------- cost


def test_unknown_model_counts_tokens_but_costs_none():
    with ScriptedServer(lambda body, i: ok(GOOD, prompt_tokens=321, completion_tokens=12)) as server:
        result = client(server, model="my-local-llama").complete(MESSAGES, Verdict)
    assert result.cost.input_tokens == 321 and result.cost.output_tokens == 12 and result.cost.usd is None


def test_price_table_is_configurable_and_snapshots_take_family_prices():
    with ScriptedServer(lambda body, i: ok(GOOD, prompt_tokens=1_000_000, completion_tokens=1_000_000)) as server:
        custom = client(server, model="my-local-llama", prices={"my-local-llama": (1.0, 2.0)}).complete(MESSAGES, Verdict)
        snapshot = client(server, model="gpt-4o-2024-08-06").complete(MESSAGES, Verdict)
    assert custom.cost.usd == pytest.approx(3.0)
    assert snapshot.cost.usd == pytest.approx(DEFAULT_PRICES["gpt-4o"].input + DEFAULT_PRICES["gpt-4o"].output)
    assert isinstance(DEFAULT_PRICES["gpt-4o-mini"], Price)


# ------------------------------------------------------------------------------ samples, threads


def test_n_samples_are_all_parsed():
    replies = ['{"score": 0.9, "reason": "a"}', '```json\n{"score": 0.8, "reason": "b"}\n```', '{"score": 0.7, "reason": "c"}']
    with ScriptedServer(lambda body, i: ok(*replies[: body.get("n", 1)])) as server:
        result = client(server).complete(MESSAGES, Verdict, n=3, temperature=0.8)
    assert server.bodies[0]["n"] == 3 and server.bodies[0]["temperature"] == 0.8
    assert [v.score for v in result.parsed] == [0.9, 0.8, 0.7] and len(result.raw) == 3
    assert result.requests == 1


def test_n_samples_from_a_server_that_ignores_n():
    scores = iter([0.9, 0.8, 0.7])
    with ScriptedServer(lambda body, i: ok(json.dumps({"score": next(scores), "reason": "r"}))) as server:
        result = client(server).complete(MESSAGES, Verdict, n=3)
    assert [v.score for v in result.parsed] == [0.9, 0.8, 0.7]
    assert [b.get("n") for b in server.bodies] == [3, 2, None]
    assert result.cost.input_tokens == 300


def test_concurrency_limit_is_shared_by_threads():
    with ScriptedServer(lambda body, i: Reply(payload=completion(GOOD), delay_s=0.15)) as server:
        judge = client(server, concurrency=2)
        threads = [threading.Thread(target=judge.complete, args=([{"role": "user", "content": f"q{k}"}], Verdict)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(server.requests) == 8
    assert server.max_in_flight == 2


def test_acomplete():
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        judge = client(server)

        async def both() -> list[Any]:
            return await asyncio.gather(judge.acomplete(MESSAGES, Verdict), judge.acomplete(MESSAGES[1:], Verdict))

        results = asyncio.run(both())
    assert [r.value.score for r in results] == [0.9, 0.9]


# ------------------------------------------------------------------------------ config and parsing


def test_environment_supplies_model_url_and_key(monkeypatch):
    with ScriptedServer(lambda body, i: ok(GOOD)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        monkeypatch.setenv("GROUNDTRACE_JUDGE_MODEL", "qwen2.5-7b-instruct")
        judge = JudgeClient(cache=False)
        judge.complete(MESSAGES, Verdict)
    assert judge.model == "qwen2.5-7b-instruct" and server.bodies[0]["model"] == "qwen2.5-7b-instruct"


def test_default_model_and_missing_key_for_openai(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GROUNDTRACE_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        JudgeClient(cache=False)
    assert JudgeClient(api_key="sk-x", cache=False).model == "gpt-4o-mini"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2,]", [1, 2]),
        ('prefix {"a": "} not the end {", "b": [1, 2,],} suffix', {"a": "} not the end {", "b": [1, 2]}),
        ("```\n{\"a\": 1}\n```", {"a": 1}),
        ('{broken} and then {"a": 2}', {"a": 2}),
        ('<think>{"draft": true}</think> {"a": 3}', {"a": 3}),
    ],
)
def test_extract_json(text: str, expected: Any):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", '{"a": '])
def test_extract_json_rejects_text_without_json(text: str):
    with pytest.raises(ValueError):
        extract_json(text)
