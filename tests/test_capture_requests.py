"""Each request's capture is its own: what a retrieval leaves waiting is paired only with a model call given its
passages, under the same trace, and never outlives its request's scope; passages are read when the retrieval
returns; decorated generators keep their turn in a context of their own and behave exactly as undecorated ones;
a forked child starts its Monitor anew. Real Monitors, a real OpenTelemetry SDK, real WSGI and ASGI servers'
calling conventions (wsgiref's validator, Starlette's test client)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import groundtrace
from groundtrace.capture import marked
from groundtrace.monitor import Monitor
from tests.custom_sinks import PlainSink

PATIENT = "Which dose of insulin did patient 4411 get?"


@groundtrace.retrieval
def search(query: str) -> list[str]:
    who = query.split()[-1].rstrip("?")
    return [f"Record of {who}: the answer for {who} is in section {len(who)}."]


@pytest.fixture(autouse=True)
def nothing_waiting() -> Iterator[None]:
    marked.drop_pending()
    yield
    marked.drop_pending()


@pytest.fixture
def collected() -> Iterator[tuple[Monitor, PlainSink]]:
    sink = PlainSink()
    monitor = Monitor(metrics=["lexical"], sinks=[sink], isolation="thread", flush_at_exit=False)
    yield monitor, sink
    monitor.close()


# --------------------------------------------------------------------------------- pairing rules
def test_a_model_call_takes_only_the_retrievals_its_input_holds():
    search(PATIENT)  # request A retrieved, then refused: no model call
    assert marked.take_pending([{"role": "user", "content": "Hello! How are you today?"}]) == []  # B's small talk
    prompt = f"Answer from these passages:\n{search('What about alice?')[0]}\nQuestion: What about alice?"
    taken = marked.take_pending([{"role": "user", "content": prompt}])
    assert [r.query for r in taken] == ["What about alice?"]  # not A's patient query
    assert [r.query for r in marked.PENDING.get()] == [PATIENT]  # A's waits, for its own call or its end


def test_a_passage_counts_whole_or_by_its_start_never_by_an_end_many_passages_share():
    long = "Refund policy. " + "x" * 900 + " Questions? Write to support@example.com."
    other = "Shipping policy. " + "y" * 900 + " Questions? Write to support@example.com."

    @groundtrace.retrieval
    def kb(query: str) -> list[str]:
        return [long]

    kb("refunds")
    assert marked.take_pending(f"Context: {other}") == []  # the same ending is not the same passage
    assert len(marked.take_pending(f"Context: {long[:500]} [cut]")) == 1  # a template that cut it still gave it


def test_a_retrieval_under_another_trace_is_not_taken():
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("server")
    with tracer.start_as_current_span("GET /a"):
        passage = search("What about bob?")[0]
    with tracer.start_as_current_span("GET /b"):
        assert marked.take_pending(passage) == []  # another request's, dropped
    assert marked.PENDING.get() == ()


def test_a_request_scope_drops_what_its_request_left_and_restores_the_callers():
    search(PATIENT)
    with groundtrace.request_scope():
        assert marked.PENDING.get() == ()  # nothing of before reaches the request
        search("What about carol?")
    assert marked.PENDING.get() == ()  # nothing of the request outlives it


def test_a_pooled_thread_does_not_carry_one_requests_retrieval_into_the_next(collected):
    """One thread serves three requests in turn (a ThreadPoolExecutor worker, gunicorn's gthread): a patient's
    query retrieved and refused, small talk with the model, then a RAG turn. No record holds the patient's text."""
    monitor, sink = collected
    turns: list[str] = []

    def model_call(prompt: str) -> str:  # what an integration does when a model is called by hand
        taken = marked.take_pending(prompt)
        turns.extend(r.query or "" for r in taken)
        if taken:
            with groundtrace.turn(taken[0].query, monitor=monitor) as turn:
                for retrieved in taken:
                    turn.retrievals.append(retrieved)
                turn.answer = "It is in section 5."
        return "ok"

    def refused() -> None:
        search(PATIENT)

    def small_talk() -> None:
        model_call("Hello there, how are you?")

    def rag() -> None:
        passages = search("What about dave?")
        model_call("Passages:\n" + "\n".join(passages) + "\nQuestion: What about dave?")

    with ThreadPoolExecutor(1) as pool:
        for job in (refused, small_talk, rag):
            pool.submit(job).result()
    assert monitor.flush(10)
    [(record, _)] = sink.got
    assert record.question == "What about dave?" and record.contexts == ["Record of dave: the answer for dave is in "
                                                                          "section 4."]
    assert turns == ["What about dave?"] and "4411" not in repr(record)


def test_passages_are_read_when_the_retrieval_returns_not_when_the_record_is_built(collected):
    """A retrieval that refills one list per request: each record keeps the passages its request was given."""
    monitor, sink = collected
    shared: list[str] = []

    @groundtrace.retrieval
    def refill(query: str) -> list[str]:
        shared[:] = [f"The fee of {query} is {len(query)} euros."]
        return shared

    gate = threading.Event()

    class Slow(PlainSink):  # the records are built and delivered after every request refilled the list
        def emit(self, record: Any, scores: Any) -> None:
            gate.wait(10)
            super().emit(record, scores)

    slow = Slow()
    late = Monitor(metrics=["lexical"], sinks=[slow], isolation="thread", flush_at_exit=False)
    try:
        for name in ("alice", "bob", "carol"):
            with groundtrace.turn(f"What is the fee of {name}?", monitor=late) as turn:
                refill(name)
                turn.answer = "It is 5 euros."
        gate.set()
        assert late.flush(10)
    finally:
        late.close()
    assert {r.question.split()[-1]: r.contexts for r, _ in slow.got} == {
        "alice?": ["The fee of alice is 5 euros."], "bob?": ["The fee of bob is 3 euros."],
        "carol?": ["The fee of carol is 5 euros."]}


# ------------------------------------------------------------------------------------- middleware
def test_the_wsgi_middleware_scopes_each_request_until_its_body_is_closed():
    from wsgiref.util import setup_testing_defaults
    from wsgiref.validate import validator

    seen: list[tuple[Any, ...]] = []

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        seen.append(marked.PENDING.get())
        search("What about erin?")  # retrieved, then refused
        start_response("200 OK", [("Content-Type", "text/plain")])
        yield b"no"
        yield b"pe"
        seen.append(tuple(r.query for r in marked.PENDING.get()))  # still this request's while its body streams

    wrapped = validator(groundtrace.WSGIMiddleware(app))  # PEP 3333's own checks of the wrapper
    search(PATIENT)  # left on this thread by an earlier request
    for _ in range(2):
        environ: dict[str, Any] = {"QUERY_STRING": ""}
        setup_testing_defaults(environ)
        body = wrapped(environ, lambda status, headers, exc_info=None: None)
        assert b"".join(body) == b"nope"
        body.close()
        assert marked.PENDING.get() == ()  # nothing outlives the request
    assert seen == [(), ("What about erin?",), (), ("What about erin?",)]


def test_the_wsgi_middleware_passes_an_applications_exception_through_and_still_ends_the_scope():
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        search("What about frank?")
        raise KeyError("the app's own")

    with pytest.raises(KeyError, match="the app's own"):
        groundtrace.WSGIMiddleware(app)({}, lambda *a: None)
    assert marked.PENDING.get() == ()


def test_the_asgi_middleware_scopes_http_requests_and_passes_lifespan_through():
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    seen: list[int] = []

    async def endpoint(request: Any) -> PlainTextResponse:
        seen.append(len(marked.PENDING.get()))
        search(request.query_params["q"])
        return PlainTextResponse("refused")

    started: list[bool] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        started.append(True)
        yield

    app = Starlette(routes=[Route("/", endpoint)], middleware=[Middleware(groundtrace.ASGIMiddleware)],
                    lifespan=lifespan)
    with TestClient(app) as client:
        assert [client.get("/", params={"q": f"What about {n}?"}).text for n in ("gina", "hal")] == ["refused"] * 2
    assert seen == [0, 0] and started == [True]


# ------------------------------------------------------------------------------------- generators
def test_interleaved_turn_generators_keep_their_own_turns_and_leave_the_callers_context_clean(collected):
    monitor, sink = collected

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> Iterator[str]:
        search(question)
        yield "It is "
        search(question)
        yield f"in the record of {question.split()[-1].rstrip('?')}."

    first, second = answer("What about ivan?"), answer("What about judy?")
    for a, b in zip(first, second, strict=True):  # consumed round-robin on one thread
        assert marked.current_turn.get() is None and a and b
    assert marked.current_turn.get() is None and marked.PENDING.get() == ()
    assert monitor.flush(10)
    got = {r.question: (r.contexts, r.answer) for r, _ in sink.got}
    assert got == {q: ([f"Record of {n}: the answer for {n} is in section 4."], f"It is in the record of {n}.")
                   for q, n in (("What about ivan?", "ivan"), ("What about judy?", "judy"))}


def test_a_decorated_generator_behaves_exactly_as_the_undecorated_one():
    def plain(query: str) -> Iterator[str]:
        received = yield f"first for {query}"
        try:
            yield f"got {received}"
        except ValueError as error:
            yield f"handled {error}"
        return "the return value"

    decorated = groundtrace.retrieval(plain)
    for function in (plain, decorated):
        generator = function("q")
        assert next(generator) == "first for q"
        assert generator.send("X") == "got X"
        assert generator.throw(ValueError("boom")) == "handled boom"

        def outer(function: Any = function) -> Iterator[str]:
            result = yield from function("q")
            yield f"returned {result}"

        assert list(outer()) == ["first for q", "got None", "returned the return value"]
    [got] = marked.take_pending()  # the decorated run read to its end: its items
    assert got.candidate() is not None and [p.text for p in got.candidate().passages] == ["first for q", "got None"]


def test_a_closed_retrieval_generator_delivers_what_was_read():
    @groundtrace.retrieval
    def many(query: str) -> Iterator[str]:
        for i in range(100):
            yield f"passage {i} for {query}"

    generator = many("q")
    assert [next(generator) for _ in range(2)] == ["passage 0 for q", "passage 1 for q"]
    generator.close()
    [got] = marked.take_pending()
    assert [p.text for p in got.candidate().passages] == ["passage 0 for q", "passage 1 for q"]


def test_an_async_generator_passes_asend_and_athrow_through():
    @groundtrace.retrieval
    async def stream(query: str) -> AsyncIterator[str]:
        received = yield f"first for {query}"
        try:
            yield f"got {received}"
        except ValueError as error:
            yield f"handled {error}"

    async def main() -> list[str]:
        generator = stream("q")
        out = [await generator.asend(None), await generator.asend("X"), await generator.athrow(ValueError("boom"))]
        await generator.aclose()
        return out

    assert asyncio.run(main()) == ["first for q", "got X", "handled boom"]


def test_a_turn_never_raises_into_the_app_when_its_value_cannot_be_read(collected):
    monitor, _ = collected

    class Unread:  # an unread streaming response, an object whose __getattr__ fails
        def __getattr__(self, name: str) -> Any:
            raise KeyError(name)

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> Unread:
        return Unread()

    assert isinstance(answer("What about kim?"), Unread)


def test_a_turn_returning_an_unread_httpx_stream_gets_it_back_unread_and_readable(collected):
    """A real httpx streaming Response (served by httpx's own in-memory transport: no socket): reading .text of an
    unread stream raises ResponseNotRead; the turn must neither raise it nor read the stream for the app."""
    httpx = pytest.importorskip("httpx")
    monitor, _ = collected

    def body() -> Iterator[bytes]:  # a body that arrives in parts, as a model's stream does
        yield b"At 9 "
        yield b"am."

    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, content=body())))

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> Any:
        return client.send(client.build_request("GET", "http://127.0.0.1/answer"), stream=True)

    response = answer("When does it open?")
    assert isinstance(response, httpx.Response) and not response.is_stream_consumed
    assert response.read() == b"At 9 am."


# ------------------------------------------------------------------------------------------- fork
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_starts_its_monitor_anew_and_keeps_no_inherited_sigterm_handler():
    """The parent built a Monitor and has a record in flight; the forked child scores its own record, counts
    only its own, and does not keep the parent's SIGTERM handler (a pool's terminate() is not delayed by it)."""
    program = f"""
import json, os, signal, sys
sys.path.insert(0, {os.getcwd()!r})
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from tests.custom_sinks import PlainSink
sink = PlainSink()
monitor = Monitor(["lexical"], [sink], isolation="thread")
parent_handler = getattr(signal.getsignal(signal.SIGTERM), "__name__", "")
monitor.submit(Record(id="parent", contexts=["The fee is 100 rubles."], answer="The fee is 100 rubles."))
pid = os.fork()
if pid == 0:
    handler = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    monitor.submit(Record(id="child", contexts=["The fee is 100 rubles."], answer="The fee is 200 rubles."))
    monitor.flush(10)
    print(json.dumps({{"parent_handler": parent_handler, "handler": handler, "ids": [r.id for r, _ in sink.got],
                      "submitted": monitor.stats.submitted, "scored": monitor.stats.scored}}), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["ids"] == ["child"] and child["submitted"] == child["scored"] == 1  # its own record, its own counts
    assert child["parent_handler"] == "_on_sigterm" and child["handler"] is True  # the default, not the parent's
