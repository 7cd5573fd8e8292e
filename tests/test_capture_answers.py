"""The answer of a turn whose function returns the provider's own body, as the SDK's object or as raw JSON."""

from __future__ import annotations

import pytest

from groundtrace.capture.explicit import answer_text

ANSWER = "It opens at 9 am."

BODIES = {
    "openai chat completion": {"id": "chatcmpl-1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}]},
    "openai responses": {"id": "resp_1", "object": "response", "output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It opens ", "annotations": []},
                                                             {"type": "output_text", "text": "at 9 am.", "annotations": []}]}]},
    "anthropic message": {"id": "msg_1", "type": "message", "role": "assistant",
                          "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn"},
    "gemini": {"candidates": [{"content": {"role": "model", "parts": [{"text": "It opens at "}, {"text": "9 am."}]},
                               "finishReason": "STOP"}]},
}


@pytest.mark.parametrize("provider", BODIES)
def test_a_providers_raw_json_body_gives_its_answer(provider):
    assert answer_text(BODIES[provider]) == ANSWER


def test_the_openai_sdks_own_objects_give_their_answer():
    openai = pytest.importorskip("openai")
    completion = openai.types.chat.ChatCompletion.model_validate(
        {**BODIES["openai chat completion"], "created": 0, "model": "m"})
    assert answer_text(completion) == ANSWER
    response = openai.types.responses.Response.model_validate(
        {**BODIES["openai responses"], "created_at": 0, "model": "m", "parallel_tool_calls": False, "tool_choice": "auto",
         "tools": [], "output": [BODIES["openai responses"]["output"][1] | {"id": "m1", "status": "completed"}]})
    assert answer_text(response) == ANSWER  # its output_text property
