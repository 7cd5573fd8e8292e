"""Loopback servers for the sink tests: everything stays on 127.0.0.1 and stops after its test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from groundtrace.record import Record
from groundtrace.score import Cost, Score, Span
from tests.loopback import LoopbackServer, Reply, Request
from tests.phoenix_server import free_port as _free_port

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
RUN_ID = "1f0e4d2c-3b5a-4c6d-8e9f-0a1b2c3d4e5f"


@pytest.fixture
def loopback() -> Iterator[Callable[[Callable[[Request], Reply]], LoopbackServer]]:
    """Start loopback servers inside the test; each stops when the test ends."""
    servers: list[LoopbackServer] = []

    def start(respond: Callable[[Request], Reply]) -> LoopbackServer:
        server = LoopbackServer(respond).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function that returns a loopback port nothing listens on (yet)."""
    return _free_port


@pytest.fixture
def refused_url() -> str:
    """A loopback URL where nothing listens: connections are refused at once."""
    return f"http://127.0.0.1:{_free_port()}"


@pytest.fixture
def record() -> Record:
    """A record with every id an adapter fills: OpenTelemetry trace and span, LangChain run."""
    return Record(id="r1", question="Where is the Eiffel Tower?", contexts=["The Eiffel Tower is in Paris."],
                  answer="It is in Paris, built in 1850.", trace_id=TRACE_ID, span_id=SPAN_ID, run_id=RUN_ID)


@pytest.fixture
def grounded() -> Score:
    return Score(metric="facts", value=0.75, higher_is_better=True, hallucinated=False, threshold=0.5,
                 reason="3 of 4 claims supported", record_id="r1",
                 spans=[Span(start=17, end=30, text="built in 1850", score=0.9)])


@pytest.fixture
def judged() -> Score:
    """A judge metric's Score, as JudgeMetric.score makes it: the judge's summary in details, its tokens."""
    return Score(metric="faithfulness", value=0.5, higher_is_better=True, hallucinated=True, threshold=0.7,
                 reason="1 of 2 statements supported", record_id="r1",
                 details={"judge": {"model": "smollm2-135m", "mode": "json_schema", "requests": 2}},
                 cost=Cost(input_tokens=420, output_tokens=37))


@pytest.fixture
def failed() -> Score:
    """An error Score: the metric failed, so there is no value to send."""
    return Score(metric="judge", value=None, higher_is_better=True, error="timed out after 30 s", record_id="r1")
