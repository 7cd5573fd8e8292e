"""groundtrace.capture.earlier_turns: the tool calls of ended turns, which a later turn of the conversation
reads again from the agent's memory (both integrations name the turn an earlier output came from)."""

from groundtrace.capture.earlier_turns import EarlierCall, EarlierCalls

OUTAGE = "Error: the fee service is down."


def test_earlier_calls_are_found_by_id_and_text_and_bounded():
    calls = EarlierCalls(limit=2)
    calls.remember("call-0", OUTAGE, "turn-1", error=True)
    assert calls.find("call-0", OUTAGE) == EarlierCall("turn-1", True)
    assert calls.find("call-0", "another conversation's output under the same id") is None
    assert calls.find(None, OUTAGE) is None
    calls.remember("call-1", "a", "turn-2", error=False)
    calls.remember("call-2", "b", "turn-3", error=False)
    assert (len(calls), calls.find("call-0", OUTAGE), calls.find("call-2", "b")) == (2, None, EarlierCall("turn-3", False))


def test_a_call_remembered_again_is_the_newest_and_evicted_last():
    calls = EarlierCalls(limit=2)
    calls.remember("call-0", "a", "turn-1", error=False)
    calls.remember("call-1", "b", "turn-1", error=False)
    calls.remember("call-0", "a", "turn-2", error=False)  # the same id, seen again by a later turn
    calls.remember("call-2", "c", "turn-3", error=False)
    assert (calls.find("call-0", "a"), calls.find("call-1", "b")) == (EarlierCall("turn-2", False), None)
