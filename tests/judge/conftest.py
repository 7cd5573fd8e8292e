"""Fixtures of the judge tests: sample records, and a real llama.cpp server (session scope)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groundtrace.testing.llama_server import LlamaServer, server_unavailable

TESLA = {
    "id": "tesla",
    "question": "When was Tesla founded, and where is it based?",
    "contexts": [
        "Tesla was founded in 2003 by Martin Eberhard and Marc Tarpenning.",
        "The company is based in Austin, Texas. It makes electric cars.",
    ],
    "answer": "Tesla was founded in 2004 by Martin Eberhard. It is based in Austin. It may be the largest carmaker.",
    "reference": "Tesla was founded in 2003 and is based in Austin, Texas.",
    "language": "en",
}


@pytest.fixture
def record() -> dict:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in TESLA.items()}


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1."""
    missing = server_unavailable()
    if missing:
        pytest.skip(missing)
    with LlamaServer() as server:
        yield server
