from __future__ import annotations

import os

# a Monitor given no sinks writes to the default store (groundtrace-scores.jsonl in the working
# directory) when none is configured: the tests say none, and those of the default store unset it
os.environ.setdefault("GROUNDTRACE_SINKS", "none")
# SDKs that report usage home (MLflow 3.x) are told not to: the suite reaches nothing beyond this machine
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import socket
from collections.abc import Iterator

import pytest
from groundtrace.monitor import Monitor
from li_support import CollectSink, build_index
from llama_index.core import Settings
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM

import groundtrace_llamaindex

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture(scope="session", autouse=True)
def offline() -> Iterator[None]:
    """No test talks to anything but this machine; LlamaIndex defaults never reach OpenAI."""
    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address) -> None:
        if isinstance(address, tuple) and address[0] not in _LOOPBACK:
            raise ConnectionRefusedError(f"tests may only connect to 127.0.0.1, not {address[0]}")
        return connect(sock, address)

    socket.socket.connect = loopback_only
    Settings.llm = MockLLM(max_tokens=8)
    Settings.embed_model = MockEmbedding(embed_dim=8)
    yield
    socket.socket.connect = connect


@pytest.fixture(scope="session")
def index():
    return build_index()


@pytest.fixture
def sink() -> CollectSink:
    return CollectSink()


@pytest.fixture
def monitor(sink: CollectSink) -> Iterator[Monitor]:
    with Monitor(metrics=["lexical"], sinks=[sink], flush_at_exit=False) as live:
        yield live


@pytest.fixture
def instrumented(index, monitor: Monitor) -> Iterator[Monitor]:
    """The index is built first: building it is no request and must not be what a test observes."""
    groundtrace_llamaindex.instrument(monitor=monitor)
    yield monitor
    # every root is accounted for once: recorded + sum(no_record) + failed + evicted + not_turns + in_flight
    stats = groundtrace_llamaindex.stats()
    groundtrace_llamaindex.uninstrument()
    assert stats.roots == stats.recorded + sum(stats.no_record.values()) + stats.failed + stats.evicted \
        + stats.not_turns + stats.in_flight, stats

