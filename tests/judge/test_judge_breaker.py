"""A judge that hangs, answers 500, answers junk or floods: the circuit breaker opens after repeated failures
(one WARNING), the records behind it get an error Score at once, a probe closes it again; every reply that
cannot be read is the documented parse error; no reply is echoed back larger than a bound. A real OpenAI
client against a loopback server on 127.0.0.1."""

from __future__ import annotations

import logging
import time

import pytest

pytest.importorskip("openai")

from pydantic import BaseModel

from groundtrace.backends.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, CircuitOpen
from groundtrace.backends.judge import JudgeError
from groundtrace.backends.judge.structured import MAX_ECHO
from tests.loopback import Reply
from tests.test_judge_backend import MESSAGES, ScriptedServer, client, completion


class Verdict(BaseModel):
    verdict: str


GOOD = Reply(payload=completion('{"verdict": "yes"}'))
FAILING = Reply(500, {"error": {"message": "internal error"}})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------------ the breaker itself
def test_it_opens_after_failures_in_a_row_refuses_then_a_probe_decides(caplog):
    clock = Clock()
    breaker = CircuitBreaker("the judge at X", failures=3, backoff_s=30, clock=clock)
    with caplog.at_level(logging.WARNING, logger="groundtrace.backends"):
        for _ in range(2):
            breaker.before()
            breaker.failed("timeout")
        breaker.before()
        breaker.succeeded()  # a success in between: the count starts again
        for _ in range(3):
            breaker.before()
            breaker.failed("timeout")
        assert breaker.state == OPEN
        with pytest.raises(CircuitOpen, match=r"the judge at X is failing \(timeout\): not asked again for 30 s"):
            breaker.before()
        clock.now += 31
        assert breaker.state == HALF_OPEN
        breaker.before()  # the probe goes through
        with pytest.raises(CircuitOpen):  # and nothing else while it is out
            breaker.before()
        breaker.failed("timeout")  # the probe failed: open again, twice as long
        clock.now += 31
        with pytest.raises(CircuitOpen, match="for 29 s"):
            breaker.before()
        clock.now += 30
        breaker.before()
        breaker.succeeded()
    assert breaker.state == CLOSED and (breaker.refused, breaker.opened) == (3, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "groundtrace: the judge at X failed 3 times in a row (timeout): its records get an error Score at once for "
        "30 s, then one call tries it again (circuit breaker)",
        "groundtrace: the judge at X answers again: circuit breaker closed"]


def test_a_probe_that_raises_anything_reopens_it():
    clock = Clock()
    breaker = CircuitBreaker("x", failures=1, backoff_s=5, clock=clock)
    breaker.before()
    breaker.failed("server")
    clock.now += 6
    breaker.before()
    breaker.failed("KeyError")  # whatever failed, the probe is settled: not left out for ever
    clock.now += 11
    breaker.before()
    assert breaker.state == HALF_OPEN


# ------------------------------------------------------------------------------------- the judge client
def test_a_judge_answering_500_opens_the_breaker_and_later_calls_cost_no_request(caplog):
    with ScriptedServer(lambda body, i: FAILING) as server:
        judge = client(server, max_retries=0, breaker_failures=3, breaker_backoff_s=60)
        kinds = []
        with caplog.at_level(logging.WARNING, logger="groundtrace"):
            for _ in range(10):
                with pytest.raises(JudgeError) as failed:
                    judge.complete(MESSAGES, Verdict)
                kinds.append(failed.value.kind)
    assert kinds == ["server"] * 3 + ["unavailable"] * 7
    assert len(server.requests) == 3  # the seven refused calls reached nothing
    assert judge.breaker.refused == 7
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "failed 3 times in a row (server, HTTP 500)" in warnings[0]


def test_a_hanging_judge_costs_three_timeouts_then_nothing():
    with ScriptedServer(lambda body, i: Reply(payload=completion('{"verdict": "yes"}'), delay_s=5)) as server:
        judge = client(server, max_retries=0, timeout_s=0.3, breaker_failures=3)
        started = time.monotonic()
        for _ in range(3):
            with pytest.raises(JudgeError, match="did not answer within 0.3 s"):
                judge.complete(MESSAGES, Verdict)
        hung = time.monotonic() - started
        started = time.monotonic()
        for _ in range(20):
            with pytest.raises(JudgeError) as refused:
                judge.complete(MESSAGES, Verdict)
        fast = time.monotonic() - started
    assert refused.value.kind == "unavailable"
    assert hung >= 0.9 and fast < 0.5  # 20 records behind an open breaker cost less than one timeout


def test_the_breaker_closes_when_the_judge_answers_again():
    replies = [FAILING, FAILING, GOOD]
    with ScriptedServer(lambda body, i: replies[min(i, 2)]) as server:
        judge = client(server, max_retries=0, breaker_failures=2, breaker_backoff_s=0.2)
        for _ in range(2):
            with pytest.raises(JudgeError):
                judge.complete(MESSAGES, Verdict)
        with pytest.raises(JudgeError, match="circuit breaker open"):
            judge.complete(MESSAGES, Verdict)
        time.sleep(0.25)
        assert judge.complete(MESSAGES, Verdict).value.verdict == "yes"  # the probe
        assert judge.breaker.state == CLOSED


def test_a_refusal_or_an_unusable_reply_is_no_fault_of_the_judge():
    with ScriptedServer(lambda body, i: Reply(payload=completion("not json at all"))) as server:
        judge = client(server, max_retries=0, breaker_failures=1)
        for _ in range(3):
            with pytest.raises(JudgeError) as failed:
                judge.complete(MESSAGES, Verdict)
            assert failed.value.kind == "parse"
    assert judge.breaker.state == CLOSED  # the server answered each time: the next record may do better


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe\xfa garbage", b"[1, 2"], ids=["json", "utf8", "truncated"])
def test_a_body_that_is_no_json_is_the_documented_parse_error(body):
    with ScriptedServer(lambda _, i: Reply(body=body)) as server:
        judge = client(server, max_retries=0)
        with pytest.raises(JudgeError) as failed:
            judge.complete(MESSAGES, Verdict)
    assert failed.value.kind == "parse" and failed.value.fault is True
    assert "answered with a body that is no chat completion" in str(failed.value)


def test_a_flooding_reply_is_not_echoed_back_whole():
    flood = "x" * 10_000_000
    with ScriptedServer(lambda body, i: Reply(payload=completion(flood if i == 0 else '{"verdict": "no"}'))) as server:
        judge = client(server, max_retries=0)
        assert judge.complete(MESSAGES, Verdict).value.verdict == "no"  # the repair request's answer
        repair = server.bodies[1]
    echoed = repair["messages"][-2]
    assert echoed["role"] == "assistant" and len(echoed["content"]) <= MAX_ECHO + 3
    assert len(server.requests[1].body) < 20_000


def test_behind_a_failing_judge_a_monitors_records_fail_at_once_counted_with_one_warning(caplog):
    from groundtrace.monitor import Monitor
    from groundtrace.record import Record

    with ScriptedServer(lambda body, i: FAILING) as server:
        options = {"faithfulness": {"base_url": server.url, "api_key": "sk-test", "max_retries": 0, "cache": False,
                                    "breaker_failures": 3, "breaker_backoff_s": 60}}
        with caplog.at_level(logging.WARNING, logger="groundtrace"), \
                Monitor(["faithfulness"], "none", options=options, isolation="thread", flush_at_exit=False) as monitor:
            started = time.monotonic()
            for i in range(20):
                monitor.submit(Record(id=f"r{i}", question="Who?", contexts=["Marie Curie won two Nobel prizes."],
                                      answer="Marie Curie won two Nobel prizes."))
            assert monitor.flush(30)
            took, stats = time.monotonic() - started, monitor.stats
        requests = len(server.requests)
    assert (stats.failed, stats.scored) == (20, 0)
    assert requests == 3 and took < 5  # the 17 records behind the open breaker cost no request
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "circuit breaker" in said[0]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no ERROR per record
