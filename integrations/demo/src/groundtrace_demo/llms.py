"""Which LLM writes the demo's answers, in this order:

1. an OpenAI-compatible endpoint, when OPENAI_BASE_URL or OPENAI_API_KEY is set and the partner
   packages langchain-openai and llama-index-llms-openai-like are installed;
2. a local llama.cpp server (or any OpenAI-compatible server) that answers at
   GROUNDTRACE_DEMO_LLM_URL; the demo never starts one;
3. a replay of the recorded answers in data/questions.jsonl, some with planted hallucinations.

GROUNDTRACE_DEMO_MODEL names the model for 1 and 2. Nothing here imports LangChain or LlamaIndex:
the framework modules wrap a Responder in their own model classes (see langchain_app, llamaindex_app).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from groundtrace.config import demo_llm

from groundtrace_demo import installed
from groundtrace_demo.data import Question

REPLAY_LABEL = "replay: recorded answers, some with planted hallucinations"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
# No proxy: the local server is on this machine, and the environment's proxy must not see it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Responder(Protocol):
    kind: str

    def reply(self, messages: list[dict[str, str]]) -> str: ...


class ReplayResponder:
    """Returns the recorded answer of the question it is asked."""

    kind = "replay"

    def __init__(self, questions: Iterable[Question]) -> None:
        self._answers = {q.question: q.answer for q in questions}

    def reply(self, messages: list[dict[str, str]]) -> str:
        text = messages[-1]["content"] if messages else ""
        # LangChain sends the question as the last message, LlamaIndex embeds it in its prompt:
        # the longest recorded question found in the text is the one asked.
        found = [question for question in self._answers if question in text]
        if not found:
            raise LookupError(f"the replay model has no recorded answer for: {text[-200:]!r}")
        return self._answers[max(found, key=len)]


class ServerResponder:
    """Chat completions from an OpenAI-compatible server (llama.cpp's, say), over plain HTTP."""

    kind = "llama.cpp"

    def __init__(self, url: str, model: str, timeout_s: float = 120.0, max_tokens: int = 200) -> None:
        self.url, self.model, self.timeout_s, self.max_tokens = url, model, timeout_s, max_tokens

    def reply(self, messages: list[dict[str, str]]) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": self.max_tokens}
        request = urllib.request.Request(f"{self.url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with _OPENER.open(request, timeout=self.timeout_s) as response:
            return json.load(response)["choices"][0]["message"]["content"].strip()


@dataclass
class LLMChoice:
    kind: str  # "openai", "llama.cpp" or "replay"
    label: str  # what the output says was used
    responder: Responder | None = None  # llama.cpp and replay: wrapped by the demo's model classes
    model: str | None = None  # openai: built with the partner packages
    base_url: str | None = None
    api_key: str | None = None  # openai: read with the rest of the environment in choose_llm, nowhere else
    notes: list[str] = field(default_factory=list)  # why earlier choices were passed over

    @property
    def replay(self) -> bool:
        return self.kind == "replay"


def server_url(url: str) -> str:
    """'http://127.0.0.1:8080' or '.../v1' -> the API root ending in /v1."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def probe_server(url: str, timeout_s: float = 2.0) -> str:
    """The first model the server lists; raises OSError (or ValueError) if it does not answer."""
    with _OPENER.open(f"{url}/models", timeout=timeout_s) as response:
        models = json.load(response).get("data") or []
    return models[0]["id"] if models else "default"


def choose_llm(questions: Iterable[Question], environ: Mapping[str, str] | None = None) -> LLMChoice:
    env = os.environ if environ is None else environ
    notes: list[str] = []
    model, server = demo_llm(env)
    if env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        if installed("langchain_openai") and installed("llama_index.llms.openai_like"):
            base_url = env.get("OPENAI_BASE_URL") or None
            model = model or DEFAULT_OPENAI_MODEL
            return LLMChoice("openai", f"OpenAI-compatible endpoint {base_url or 'api.openai.com'}, model {model}",
                             model=model, base_url=base_url, api_key=env.get("OPENAI_API_KEY") or None, notes=notes)
        notes.append("OPENAI_BASE_URL/OPENAI_API_KEY is set, but the demo talks to it through LangChain's and "
                     "LlamaIndex's own clients: pip install langchain-openai llama-index-llms-openai-like")
    if server:
        url = server_url(server)
        try:
            listed = probe_server(url)
        except (OSError, ValueError, KeyError, IndexError) as error:
            notes.append(f"GROUNDTRACE_DEMO_LLM_URL: no server answers at {url} ({error})")
        else:
            model = model or listed
            return LLMChoice("llama.cpp", f"local server {url}, model {model}",
                             responder=ServerResponder(url, model), model=model, base_url=url, notes=notes)
    return LLMChoice("replay", REPLAY_LABEL, responder=ReplayResponder(questions), notes=notes)
