"""Guard mode for LlamaIndex (groundtrace.guard(...).wrap(engine), found by its entry point): real query and chat
engines over a real index, an LLM that answers with a planted hallucination ("15 euros" where the passage says 12)
or faithfully, and the real grounding detector, under every policy, whole and streamed chunk by chunk."""

from __future__ import annotations

import asyncio

import pytest
from li_support import ScriptedLLM
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.response.schema import AsyncStreamingResponse, Response, StreamingResponse
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import QueryBundle

import groundtrace
from groundtrace.guards import FALLBACK, GuardBlocked
from groundtrace.metrics.base import Metric
from groundtrace_llamaindex.guarded import GuardedChatEngine, GuardedQueryEngine

PASSAGE = "The Larkfield museum opened in 1978. Entry costs 12 euros. It closes at 6 pm."
QUESTION = "Tell me about the Larkfield museum."
FAITHFUL = "The Larkfield museum opened in 1978. It closes at 6 pm."
PLANTED = "The Larkfield museum opened in 1978. Entry costs 15 euros. It closes at 6 pm."
WRONG = "15 euros"
REDACTED = "The Larkfield museum opened in 1978. It closes at 6 pm."
# what the user is shown under each policy when the answer is the planted one, whole (streamed: see below)
SHOWN = {"flag": PLANTED, "redact": REDACTED, "replace": FALLBACK["en"]}
ACTION = {"flag": "flagged", "redact": "redacted", "replace": "replaced"}


class Broken(Metric):
    name, requires, higher_is_better, default_threshold = "broken", ("answer",), False, 0.5

    def compute(self, record, language):
        raise RuntimeError("the detector's model file is gone")


@pytest.fixture(scope="module")
def grounding():
    return groundtrace.get_metric("grounding")


@pytest.fixture(scope="module")
def museum():
    return VectorStoreIndex.from_documents([Document(id_="larkfield", text=PASSAGE)],
                                           embed_model=MockEmbedding(embed_dim=8))


def query_engine(museum, answer, streaming=False):
    return museum.as_query_engine(llm=ScriptedLLM(answer=answer), similarity_top_k=1, streaming=streaming)


def chat_engine(museum, answer):
    return museum.as_chat_engine(chat_mode="context", llm=ScriptedLLM(answer=answer), similarity_top_k=1)


def guarded(grounding, engine, policy, metrics=None):
    reask = (lambda question, contexts, answer, phrases: FAITHFUL) if policy == "reask" else None
    return groundtrace.guard(metrics or [grounding], policy=policy, reask=reask).wrap(engine)


def verdict(response):
    return response.metadata["groundtrace"]


# ----------------------------------------------------------------------------------------------- the wrapping
def test_wrap_finds_the_integration_and_hands_the_rest_to_the_engine(grounding, museum):
    engine = query_engine(museum, FAITHFUL)
    guard = groundtrace.guard([grounding])

    wrapped = guard.wrap(engine)
    assert isinstance(wrapped, GuardedQueryEngine) and wrapped.engine is engine
    assert wrapped.retriever is engine.retriever and wrapped.get_prompts().keys() == engine.get_prompts().keys()
    assert isinstance(guard.wrap(chat_engine(museum, FAITHFUL)), GuardedChatEngine)
    with pytest.raises(TypeError, match="cannot wrap a VectorStoreIndex"):
        guard.wrap(museum)
    with pytest.raises(TypeError, match="answer_key"):
        guard.wrap(engine, answer_key="answer")


def test_on_decision_is_told_every_decision_and_its_failure_is_not_the_apps(grounding, museum):
    told = []
    guard = groundtrace.guard([grounding], policy="raise")
    guard.wrap(query_engine(museum, FAITHFUL), on_decision=told.append).query(QUESTION)
    with pytest.raises(GuardBlocked):
        guard.wrap(query_engine(museum, PLANTED), on_decision=told.append).query(QUESTION)
    streamed = guard.wrap(chat_engine(museum, FAITHFUL), on_decision=told.append).stream_chat(QUESTION)
    assert "".join(streamed.response_gen) == FAITHFUL
    assert [d.action for d in told] == ["passed", "raised", "passed"]

    def broken_hook(decision):
        raise RuntimeError("the app's hook is broken")

    response = guard.wrap(query_engine(museum, FAITHFUL), on_decision=broken_hook).query(QUESTION)
    assert response.response == FAITHFUL


# ------------------------------------------------------------------------------------------------ query
@pytest.mark.parametrize("policy", ["flag", "redact", "replace"])
def test_query_a_planted_answer(grounding, museum, policy):
    response = guarded(grounding, query_engine(museum, PLANTED), policy).query(QUESTION)

    assert isinstance(response, Response)
    assert response.response == SHOWN[policy]
    assert [n.node.get_content() for n in response.source_nodes] == [PASSAGE]
    found = verdict(response)
    assert (found["action"], found["hallucinated"]) == (ACTION[policy], True)
    assert any(WRONG in text or "15" in text for _, _, text in found["spans"])
    assert "12 euros" in found["reason"]


def test_query_under_raise_raises_guard_blocked(grounding, museum):
    with pytest.raises(GuardBlocked) as blocked:
        guarded(grounding, query_engine(museum, PLANTED), "raise").query(QUESTION)
    assert (blocked.value.decision.action, blocked.value.decision.answer) == ("raised", PLANTED)


@pytest.mark.parametrize("policy", ["flag", "redact", "replace", "reask", "raise"])
def test_a_faithful_answer_passes_unchanged(grounding, museum, policy):
    engine = guarded(grounding, query_engine(museum, FAITHFUL), policy)

    response = engine.query(QueryBundle(QUESTION))
    assert response.response == FAITHFUL
    assert verdict(response) == {"action": "passed", "hallucinated": False, "reason": verdict(response)["reason"],
                                 "spans": []}
    streamed = guarded(grounding, query_engine(museum, FAITHFUL, streaming=True), policy).query(QUESTION)
    assert "".join(streamed.response_gen) == FAITHFUL
    assert verdict(streamed)["action"] == "passed"


@pytest.mark.parametrize("policy", ["flag", "redact", "replace"])
def test_aquery(grounding, museum, policy):
    response = asyncio.run(guarded(grounding, query_engine(museum, PLANTED), policy).aquery(QUESTION))

    assert isinstance(response, Response) and response.response == SHOWN[policy]
    assert (verdict(response)["action"], verdict(response)["hallucinated"]) == (ACTION[policy], True)


def test_aquery_under_raise(grounding, museum):
    with pytest.raises(GuardBlocked):
        asyncio.run(guarded(grounding, query_engine(museum, PLANTED), "raise").aquery(QUESTION))


# ------------------------------------------------------------------------------------------- streamed queries
STREAMED = {"flag": PLANTED, "redact": REDACTED,
            # the fallback ends a streamed answer: what was sent before it stays sent
            "replace": "The Larkfield museum opened in 1978. " + FALLBACK["en"]}


@pytest.mark.parametrize("policy", ["flag", "redact", "replace"])
def test_a_streamed_query_is_guarded_chunk_by_chunk(grounding, museum, policy):
    response = guarded(grounding, query_engine(museum, PLANTED, streaming=True), policy).query(QUESTION)
    assert isinstance(response, StreamingResponse)
    assert "groundtrace" not in (response.metadata or {})  # nothing is decided before it is read

    pieces = list(response.response_gen)
    assert "".join(pieces) == STREAMED[policy]
    if policy != "flag":
        assert not any(WRONG in piece for piece in pieces)
        assert all(piece.strip() for piece in pieces)  # whole sentences, never a word on its own
    assert (verdict(response)["action"], verdict(response)["hallucinated"]) == (ACTION[policy], True)


def test_a_streamed_query_under_raise_raises_before_the_sentence_is_sent(grounding, museum):
    response = guarded(grounding, query_engine(museum, PLANTED, streaming=True), "raise").query(QUESTION)
    sent = []
    with pytest.raises(GuardBlocked):
        for piece in response.response_gen:
            sent.append(piece)
    assert sent == ["The Larkfield museum opened in 1978. "]
    assert verdict(response)["action"] == "raised"


@pytest.mark.parametrize("policy", ["redact", "replace"])
def test_an_async_streamed_query(grounding, museum, policy):
    async def ask():
        response = await guarded(grounding, query_engine(museum, PLANTED, streaming=True), policy).aquery(QUESTION)
        assert isinstance(response, AsyncStreamingResponse)
        return response, [piece async for piece in response.async_response_gen()]

    response, pieces = asyncio.run(ask())
    assert "".join(pieces) == STREAMED[policy]
    assert not any(WRONG in piece for piece in pieces)
    assert verdict(response)["action"] == ACTION[policy]


# ------------------------------------------------------------------------------------------------- chat
@pytest.mark.parametrize("policy", ["flag", "redact", "replace"])
def test_chat_a_planted_answer(grounding, museum, policy):
    engine = guarded(grounding, chat_engine(museum, PLANTED), policy)

    response = engine.chat(QUESTION)
    assert isinstance(response, AgentChatResponse) and response.response == SHOWN[policy]
    assert (verdict(response)["action"], verdict(response)["hallucinated"]) == (ACTION[policy], True)
    # the next turn is written from the history: it holds what the user was shown
    assert [(m.role.value, m.content) for m in engine.chat_history] == [("user", QUESTION),
                                                                          ("assistant", SHOWN[policy])]


@pytest.mark.parametrize("policy", ["flag", "redact", "replace", "reask", "raise"])
def test_chat_a_faithful_answer(grounding, museum, policy):
    engine = guarded(grounding, chat_engine(museum, FAITHFUL), policy)

    assert engine.chat(QUESTION).response == FAITHFUL
    assert "".join(engine.stream_chat(QUESTION).response_gen) == FAITHFUL
    assert asyncio.run(engine.achat(QUESTION)).response == FAITHFUL


def test_chat_under_raise(grounding, museum):
    engine = guarded(grounding, chat_engine(museum, PLANTED), "raise")
    with pytest.raises(GuardBlocked):
        engine.chat(QUESTION)
    with pytest.raises(GuardBlocked):
        asyncio.run(engine.achat(QUESTION))
    with pytest.raises(GuardBlocked):
        list(engine.stream_chat(QUESTION).response_gen)


@pytest.mark.parametrize("policy", ["redact", "replace"])
def test_achat(grounding, museum, policy):
    engine = guarded(grounding, chat_engine(museum, PLANTED), policy)

    response = asyncio.run(engine.achat(QUESTION))
    assert response.response == SHOWN[policy] and verdict(response)["action"] == ACTION[policy]
    assert engine.chat_history[-1].content == SHOWN[policy]


@pytest.mark.parametrize("policy", ["flag", "redact", "replace"])
def test_stream_chat_chunk_by_chunk(grounding, museum, policy):
    engine = guarded(grounding, chat_engine(museum, PLANTED), policy)

    response = engine.stream_chat(QUESTION)
    assert isinstance(response, StreamingAgentChatResponse)
    pieces = list(response.response_gen)
    assert "".join(pieces) == STREAMED[policy]
    if policy != "flag":
        assert not any(WRONG in piece for piece in pieces)
    assert response.response == STREAMED[policy].strip() and str(response) == STREAMED[policy].strip()
    assert (verdict(response)["action"], verdict(response)["hallucinated"]) == (ACTION[policy], True)
    assert engine.chat_history[-1].content == STREAMED[policy].strip()


@pytest.mark.parametrize("policy", ["redact", "replace"])
def test_astream_chat(grounding, museum, policy):
    engine = guarded(grounding, chat_engine(museum, PLANTED), policy)

    async def chat():
        response = await engine.astream_chat(QUESTION)
        return response, [piece async for piece in response.async_response_gen()]

    response, pieces = asyncio.run(chat())
    assert "".join(pieces) == STREAMED[policy]
    assert not any(WRONG in piece for piece in pieces)
    assert verdict(response)["action"] == ACTION[policy]
    assert engine.chat_history[-1].content == STREAMED[policy].strip()


# -------------------------------------------------------------------------------------- a failing detector
@pytest.mark.parametrize("policy", ["redact", "replace", "raise"])
def test_a_detector_that_raises_never_raises_into_the_app(museum, policy):
    guard = groundtrace.guard([Broken()], policy=policy)

    response = guard.wrap(query_engine(museum, PLANTED)).query(QUESTION)
    assert response.response == PLANTED
    assert (verdict(response)["action"], verdict(response)["hallucinated"]) == ("unchecked", None)
    assert "the detector's model file is gone" in verdict(response)["reason"]

    streamed = guard.wrap(query_engine(museum, PLANTED, streaming=True)).query(QUESTION)
    assert "".join(streamed.response_gen) == PLANTED and verdict(streamed)["action"] == "unchecked"

    chat = guard.wrap(chat_engine(museum, PLANTED))
    assert chat.chat(QUESTION).response == PLANTED
    assert "".join(chat.stream_chat(QUESTION).response_gen) == PLANTED


def test_a_guarded_stream_read_in_part_closes_the_models(grounding, museum):
    response = guarded(grounding, chat_engine(museum, PLANTED), "redact").stream_chat(QUESTION)
    pieces = response.response_gen

    assert next(pieces) == "The Larkfield museum opened in 1978. "
    pieces.close()
    assert "groundtrace" not in response.metadata  # no verdict on an answer not read to its end
    assert response._reply.write_response_to_history_thread is None  # LlamaIndex's writer was joined


def test_a_guarded_engine_is_still_monitored(grounding, museum, instrumented, sink):
    response = guarded(grounding, query_engine(museum, PLANTED), "redact").query(QUESTION)

    assert response.response == REDACTED
    assert instrumented.flush(10)
    [record] = sink.records  # staging scores what the model wrote, once
    assert (record.question, record.contexts, record.answer) == (QUESTION, [PASSAGE], PLANTED)


@pytest.mark.parametrize("shape", ["query", "aquery", "chat", "achat"])
def test_with_an_instrumented_monitor_of_the_guards_metrics_the_answer_is_scored_once(grounding, museum, sink, shape):
    import groundtrace_llamaindex
    from groundtrace.monitor import Monitor

    decisions = []
    with Monitor(metrics=[grounding], sinks=[sink], isolation="thread", flush_at_exit=False) as monitor:
        groundtrace_llamaindex.instrument(monitor=monitor)
        try:
            engine = query_engine(museum, PLANTED) if "query" in shape else chat_engine(museum, PLANTED)
            wrapped = groundtrace.guard(policy="redact", monitor=monitor).wrap(engine, on_decision=decisions.append)
            call = getattr(wrapped, shape)
            response = asyncio.run(call(QUESTION)) if shape.startswith("a") else call(QUESTION)
            assert response.response == REDACTED
            assert monitor.flush(30)
        finally:
            groundtrace_llamaindex.uninstrument()
        stats = monitor.stats
    [(record, scores)] = sink.rows  # the guard's Score, delivered by staging's Monitor: scored once
    assert (record.question, record.answer) == (QUESTION, PLANTED) and PASSAGE in record.contexts[0]
    assert record.metadata["guard"]["action"] == "redacted" and record.metadata["nodes"]  # capture's Record
    assert scores[0].value == pytest.approx(decisions[0].scores[0].value, abs=1e-9)
    assert (stats.submitted, stats.scored, stats.flagged) == (1, 1, 1)


def test_as_a_workflow_step_the_guard_checks_the_answer_against_the_nodes_it_was_written_from(grounding, museum):
    from groundtrace.guards import passages
    from llama_index.core.schema import NodeWithScore
    from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step

    class Answered(Event):
        question: str
        nodes: list[NodeWithScore]
        answer: str

    class GuardedRAG(Workflow):
        def __init__(self, answer: str, policy: str) -> None:
            super().__init__(timeout=30)
            self.retriever, self.llm = museum.as_retriever(similarity_top_k=1), ScriptedLLM(answer=answer)
            self.guard = groundtrace.guard([grounding], policy=policy)

        @step
        async def answer(self, ev: StartEvent) -> Answered:
            nodes = await self.retriever.aretrieve(ev.question)
            reply = await self.llm.acomplete(f"Context: {nodes[0].node.get_content()}\nQuery: {ev.question}")
            return Answered(question=ev.question, nodes=nodes, answer=reply.text)

        @step
        async def check(self, ev: Answered) -> StopEvent:  # the guard as the workflow's last step
            decision = await self.guard.acheck(ev.question, passages(ev.nodes), ev.answer)
            return StopEvent(result=decision)

    async def run(answer: str, policy: str):
        return await GuardedRAG(answer, policy).run(question=QUESTION)

    redacted = asyncio.run(run(PLANTED, "redact"))
    assert (redacted.action, redacted.text) == ("redacted", REDACTED) and redacted.hallucinated is True
    assert asyncio.run(run(FAITHFUL, "replace")).text == FAITHFUL
    assert asyncio.run(run(PLANTED, "replace")).text == FALLBACK["en"]
