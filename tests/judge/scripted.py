"""A scripted OpenAI-compatible judge on 127.0.0.1 for the metric tests.

Each request is answered by the script entry for its step, named by the schema the metric asked
for ("Statements", "Verdicts", "FactualityVerdict", ...: ``response_format.json_schema.name``, or
the schema's title in llama.cpp's json_object mode). An entry is a reply content (a dict or list,
sent as JSON text; a str, sent as is), a :class:`Reply` (status codes, delays), a callable
``(body) -> entry``, or a list of entries used in turn (the last one repeats), written
``Seq(...)`` so it is not mistaken for a JSON list.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from groundtrace.backends.judge import JudgeClient
from groundtrace.metrics import get_metric
from groundtrace.metrics.judged.base import JudgeMetric
from tests.loopback import LoopbackServer, Reply, Request
from tests.test_judge_backend import completion


class Seq(list):
    """Entries answered in turn, the last one repeating."""


def step_of(body: Mapping[str, Any]) -> str:
    """The schema's name (json_schema mode) or title (llama.cpp's json_object mode)."""
    fmt = body["response_format"]
    return fmt["json_schema"]["name"] if fmt["type"] == "json_schema" else fmt["schema"]["title"]


def user_text(body: Mapping[str, Any]) -> str:
    return body["messages"][-1]["content"]


def system_text(body: Mapping[str, Any]) -> str:
    return body["messages"][0]["content"]


class ScriptedJudge(LoopbackServer):
    def __init__(self, script: Mapping[str, Any], *, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        self.script = dict(script)
        self.turns: dict[str, int] = {}
        lock = threading.Lock()

        def route(request: Request) -> Reply:
            if request.path != "/v1/chat/completions":
                return Reply(404, {"error": {"message": "not found"}})
            body = request.json
            step = step_of(body)
            entry = self.script.get(step)
            if entry is None:
                return Reply(400, {"error": {"message": f"the test script has no reply for step {step}"}})
            if isinstance(entry, Seq):
                with lock:
                    turn = self.turns.get(step, 0)
                    self.turns[step] = turn + 1
                entry = entry[min(turn, len(entry) - 1)]
            while callable(entry) and not isinstance(entry, Reply):
                entry = entry(body)
            if isinstance(entry, Reply):
                return entry
            content = entry if isinstance(entry, str) else json.dumps(entry, ensure_ascii=False)
            return Reply(payload=completion(content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))

        super().__init__(route)
        self.url = f"{self.url}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests]

    def steps(self) -> list[str]:
        return [step_of(b) for b in self.bodies]

    def bodies_of(self, step: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if step_of(b) == step]

    def client(self, **options: Any) -> JudgeClient:
        options = {"cache": False, "backoff_s": 0.01, "max_retries": 2, **options}
        return JudgeClient("gpt-4o-mini", base_url=self.url, api_key="sk-test", **options)

    def metric(self, name: str, client_options: Mapping[str, Any] | None = None, **options: Any) -> JudgeMetric:
        metric = get_metric(name, client=self.client(**(client_options or {})), **options)
        assert isinstance(metric, JudgeMetric)
        return metric


def statements(*items: str | tuple[str, str]) -> dict[str, Any]:
    """A "Statements" reply; an item is a statement, or (statement, verbatim quote)."""
    pairs = [(i, i) if isinstance(i, str) else i for i in items]
    return {"statements": [{"statement": s, "quote": q} for s, q in pairs]}


def verdicts(*values: int) -> dict[str, Any]:
    return {"verdicts": [{"reason": f"verdict {v}", "verdict": v} for v in values]}


def chat_reply(body_text: str, status: int = 200) -> Reply:
    return Reply(status, completion(body_text))
