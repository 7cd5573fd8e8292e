"""Guard mode on LangChain and LangGraph (issue 55): ``guard.wrap(...)`` around an LCEL chain with a retriever, a
LangGraph graph and a ``create_agent`` agent with a retrieval tool, each with a planted hallucination and a faithful
answer, under every policy, in invoke, batch, stream and async; ``chain | guard``; one Score per answer shared with
the application's Monitor. The real grounding detector decides; nothing of LangChain is mocked."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import groundtrace
from groundtrace.guards import FALLBACK, GuardBlocked
from groundtrace.metrics.base import Metric, Result
from groundtrace.monitor import Monitor
from groundtrace_langchain import GroundtraceCallbackHandler
from groundtrace_langchain.guarded import GuardedRunnable
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.tools import create_retriever_tool
from langgraph.graph import END, START, StateGraph

from lc_agents import ScriptedChatModel, call, user
from lc_app import PROMPT, CollectingSink, KeywordRetriever, format_documents

MUSEUM = [
    Document(id="larkfield", page_content="The Larkfield museum opened in 1978. Entry costs 12 euros. It closes at 6 pm."),
    Document(id="harbour", page_content="The harbour ferry leaves every hour from pier 4."),
]
QUESTION = "When did the Larkfield museum open and what does entry cost?"
FAITHFUL = "The Larkfield museum opened in 1978. It closes at 6 pm."
PLANTED = "The Larkfield museum opened in 1978. Entry costs 15 euros. It closes at 6 pm."
WRONG = "15 euros"
REDACTED = FAITHFUL  # the planted sentence left out


def model(answer: str) -> ScriptedChatModel:
    """A chat model that answers ``answer`` to every question (streaming it word by word)."""
    return ScriptedChatModel(respond=lambda messages: AIMessage(answer))


def rag(answer: str, llm: Any = None) -> Any:
    retriever = KeywordRetriever(documents=MUSEUM, k=1)
    return ({"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
            | PROMPT | (llm or model(answer)) | StrOutputParser())


@pytest.fixture(scope="module")
def grounding() -> Metric:
    return groundtrace.get_metric("grounding")


def guard(grounding: Metric, policy: str = "flag", **options: Any) -> Any:
    return groundtrace.guard([grounding], policy=policy, **options)


# ------------------------------------------------------------------------------------------------ LCEL chains
@pytest.mark.parametrize("policy, delivered", [
    ("flag", PLANTED), ("redact", REDACTED), ("replace", FALLBACK["en"]),
    ("reask", "Entry costs 12 euros."),
])
def test_a_chain_invoked_delivers_what_the_policy_says(grounding, policy, delivered):
    decisions = []
    options = {"reask": lambda q, contexts, a, phrases: "Entry costs 12 euros."} if policy == "reask" else {}
    guarded = guard(grounding, policy, **options).wrap(rag(PLANTED), on_decision=decisions.append)
    assert isinstance(guarded, GuardedRunnable)
    assert guarded.invoke(QUESTION) == delivered
    decision = decisions[0]
    assert decision.scores[0].metric == "grounding" and decision.text == delivered
    if policy == "reask":  # the new answer is supported; the first is kept on the decision
        assert (decision.action, decision.hallucinated, decision.reasked_from) == ("reasked", False, PLANTED)
        return
    assert decision.hallucinated is True and any(WRONG in span.text for span in decision.spans)
    assert "the contexts say 12 euros; the answer says 15 euros" in decision.reason


def test_a_faithful_chain_answer_passes_unchanged_under_every_policy(grounding):
    for policy in ("flag", "redact", "replace", "raise"):
        assert guard(grounding, policy).wrap(rag(FAITHFUL)).invoke(QUESTION) == FAITHFUL, policy


def test_raise_raises_guard_blocked_with_the_decision(grounding):
    with pytest.raises(GuardBlocked) as raised:
        guard(grounding, "raise").wrap(rag(PLANTED)).invoke(QUESTION)
    assert raised.value.decision.action == "raised" and WRONG in str(raised.value)


def test_batch_checks_each_answer_against_its_own_passages(grounding):
    by_question = {"planted": PLANTED, "faithful": FAITHFUL}

    def respond(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(by_question[str(messages[-1].content).split()[-1]])

    chain = rag("", llm=ScriptedChatModel(respond=respond))
    guarded = guard(grounding, "redact").wrap(chain)
    questions = [f"Larkfield museum entry, {kind}" for kind in ("planted", "faithful", "planted")]
    assert guarded.batch(questions) == [REDACTED, FAITHFUL, REDACTED]
    assert asyncio.run(guarded.abatch(questions)) == [REDACTED, FAITHFUL, REDACTED]


def test_ainvoke(grounding):
    assert asyncio.run(guard(grounding, "replace").wrap(rag(PLANTED)).ainvoke(QUESTION)) == FALLBACK["en"]
    assert asyncio.run(guard(grounding, "replace").wrap(rag(FAITHFUL)).ainvoke(QUESTION)) == FAITHFUL


class CountingModel(ScriptedChatModel):
    """Streams like ScriptedChatModel and keeps what it has streamed so far."""

    streamed: list[str] = []

    def _stream(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        for chunk in super()._stream(*args, **kwargs):
            self.streamed.append(chunk.message.content)
            yield chunk


@pytest.mark.parametrize("policy, delivered", [("redact", REDACTED), ("replace", "The Larkfield museum opened in "
                                                                                  "1978. " + FALLBACK["en"])])
def test_a_streamed_chain_never_sends_the_unsupported_sentence_and_holds_back_one_at_most(grounding, policy, delivered):
    llm = CountingModel(respond=lambda messages: AIMessage(PLANTED))
    pieces: list[str] = []
    for piece in guard(grounding, policy).wrap(rag(PLANTED, llm=llm)).stream(QUESTION):
        assert WRONG not in "".join(pieces) + piece  # checked chunk by chunk, as the caller receives them
        if not pieces:  # the first sentence came out before the model had written the last one
            assert "".join(llm.streamed).count(".") <= 2, llm.streamed
        pieces.append(piece)
    assert "".join(pieces) == delivered


def test_a_streamed_chain_under_flag_is_untouched_and_async_streams_are_guarded(grounding):
    assert "".join(guard(grounding).wrap(rag(PLANTED)).stream(QUESTION)) == PLANTED

    async def run() -> list[str]:
        return [piece async for piece in guard(grounding, "redact").wrap(rag(PLANTED)).astream(QUESTION)]

    pieces = asyncio.run(run())
    assert "".join(pieces) == REDACTED and not any(WRONG in p for p in pieces)


def test_chain_or_guard_takes_a_dict_with_the_answer_and_its_contexts(grounding):
    retriever = KeywordRetriever(documents=MUSEUM, k=1)
    chain = RunnableParallel(question=RunnablePassthrough(), contexts=retriever, answer=rag(PLANTED)) \
        | guard(grounding, "redact")
    assert chain.invoke(QUESTION) == REDACTED
    with pytest.raises(TypeError, match="takes a dict with the answer"):
        (rag(PLANTED) | guard(grounding)).invoke(QUESTION)


# --------------------------------------------------------------------------------- one Score, shared with staging
def test_with_the_applications_handler_the_answer_is_scored_once_and_its_score_is_the_monitors(grounding):
    sink = CollectingSink()
    monitor = Monitor(metrics=[grounding], sinks=[sink], isolation="thread", flush_at_exit=False)
    try:
        handler = GroundtraceCallbackHandler(monitor=monitor)
        decisions = []
        guarded = groundtrace.guard(policy="redact", monitor=monitor).wrap(rag(PLANTED), on_decision=decisions.append)
        assert guarded.invoke(QUESTION, config={"callbacks": [handler]}) == REDACTED
        assert monitor.flush(30)
        assert len(sink.emitted) == 1  # scored once: by the guard, delivered by the application's Monitor
        record, scores = sink.emitted[0]
        assert record.answer == PLANTED and record.contexts == [MUSEUM[0].page_content]
        assert record.metadata["guard"]["action"] == "redacted"
        assert scores[0].value == pytest.approx(decisions[0].scores[0].value, abs=1e-6)
        # the same chain with the handler alone: staging's own Score, equal within the CPU tolerance
        rag(PLANTED).invoke(QUESTION, config={"callbacks": [handler]})
        assert monitor.flush(60) and len(sink.emitted) == 2
        assert sink.emitted[1][1][0].value == pytest.approx(scores[0].value, abs=type(grounding).numerics()[0])
        assert sink.emitted[1][1][0].hallucinated is scores[0].hallucinated is True
        assert monitor.stats.scored == 2 and monitor.stats.flagged == 2
    finally:
        monitor.close()


class Slow(Metric):
    name, requires, higher_is_better, default_threshold = "slow", ("answer",), False, 0.5

    def compute(self, record, language):
        threading.Event().wait(0.5)
        return Result(0.0, "slow but fine")


class Broken(Metric):
    name, requires, higher_is_better, default_threshold = "broken", ("answer",), False, 0.5

    def compute(self, record, language):
        raise RuntimeError("the detector's model file is gone")


def test_a_budget_of_one_ms_delivers_unchecked_counts_it_and_the_score_still_reaches_the_sink():
    sink = CollectingSink()
    monitor = Monitor(metrics=[Slow()], sinks=[sink], isolation="thread", flush_at_exit=False)
    try:
        checker = groundtrace.guard(policy="replace", budget_ms=1, monitor=monitor)
        assert checker.wrap(rag(PLANTED)).invoke(QUESTION) == PLANTED  # on_timeout="pass"
        assert checker.stats["timed_out"] == 1 and checker.stats["unchecked"] == 1
        for _ in range(50):
            if sink.emitted:
                break
            threading.Event().wait(0.1)
        assert monitor.flush(10) and len(sink.emitted) == 1
        assert sink.emitted[0][1][0].reason == "slow but fine"
        assert sink.emitted[0][0].metadata["guard"]["action"] == "unchecked"
    finally:
        monitor.close()


def test_a_failing_detector_never_raises_into_the_app():
    for policy in ("flag", "replace", "raise"):
        assert groundtrace.guard([Broken()], policy=policy).wrap(rag(PLANTED)).invoke(QUESTION) == PLANTED


# ---------------------------------------------------------------------------------------- LangGraph and agents
def museum_graph(answer: str) -> Any:
    retriever = KeywordRetriever(documents=MUSEUM, k=1)
    llm = model(answer)

    def retrieve(state: dict[str, Any]) -> dict[str, Any]:
        return {"documents": retriever.invoke(state["question"])}

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        messages = PROMPT.invoke({"context": format_documents(state["documents"]), "question": state["question"]})
        return {"answer": llm.invoke(messages).content}

    from typing import TypedDict

    class State(TypedDict, total=False):
        question: str
        documents: list[Document]
        answer: str

    graph = StateGraph(State)
    graph.add_node("retrieve", retrieve)
    graph.add_node("generate", generate)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def test_a_langgraph_graphs_final_answer_is_guarded_in_its_state(grounding):
    state = guard(grounding, "redact").wrap(museum_graph(PLANTED)).invoke({"question": QUESTION})
    assert state["answer"] == REDACTED and state["documents"][0].id == "larkfield"
    assert guard(grounding, "redact").wrap(museum_graph(FAITHFUL)).invoke({"question": QUESTION})["answer"] == FAITHFUL
    streamed = list(guard(grounding, "replace").wrap(museum_graph(PLANTED)).stream({"question": QUESTION}))
    # a graph's updates are held, checked whole at the end, and sent with the answer replaced where it is
    assert [list(update) for update in streamed] == [["retrieve"], ["generate"]]
    assert streamed[1]["generate"]["answer"] == FALLBACK["en"] and WRONG not in repr(streamed)
    states = list(guard(grounding, "redact").wrap(museum_graph(PLANTED)).stream({"question": QUESTION},
                                                                                stream_mode="values"))
    assert states[-1]["answer"] == REDACTED and WRONG not in repr(states)


def museum_agent(answer: str) -> Any:
    tool = create_retriever_tool(KeywordRetriever(documents=MUSEUM, k=1), "search_museum",
                                 "Search the museum's pages.")
    replies = iter([call("search_museum", query="Larkfield museum entry"), AIMessage(answer)])
    llm = ScriptedChatModel(respond=lambda messages: next(replies))
    return create_agent(llm, tools=[tool], system_prompt="Answer from the museum's pages.")


def test_a_create_agent_agents_final_answer_is_guarded_with_its_tool_results_as_contexts(grounding):
    decisions = []
    state = guard(grounding, "redact").wrap(museum_agent(PLANTED), on_decision=decisions.append).invoke(
        user(QUESTION))
    assert state["messages"][-1].content == REDACTED
    assert state["messages"][-1].response_metadata["groundtrace"]["action"] == "redacted"
    assert decisions[0].hallucinated is True
    faithful = guard(grounding, "redact").wrap(museum_agent(FAITHFUL)).invoke(user(QUESTION))
    assert faithful["messages"][-1].content == FAITHFUL


def test_an_agents_message_stream_is_guarded_sentence_by_sentence(grounding):
    chunks = list(guard(grounding, "redact").wrap(museum_agent(PLANTED)).stream(user(QUESTION),
                                                                               stream_mode="messages"))
    kinds = [(type(message).__name__, metadata["langgraph_node"]) for message, metadata in chunks]
    # the tool's call and result pass at once; the answer comes sentence by sentence, each checked; the decision last
    assert kinds[:2] == [("AIMessageChunk", "model"), ("ToolMessage", "tools")]
    answer = [message for message, _ in chunks[2:]]
    assert [m.content for m in answer] == ["The Larkfield museum opened in 1978. ", "It closes at 6 pm.", ""]
    assert answer[-1].response_metadata["groundtrace"]["action"] == "redacted"
    assert WRONG not in repr(chunks)


def test_the_guard_on_something_it_cannot_wrap_says_so(grounding):
    with pytest.raises(TypeError, match="cannot wrap a builtins.dict"):
        guard(grounding).wrap({"not": "a runnable"})


def test_as_create_agent_middleware_the_final_message_is_replaced_in_the_state(grounding):
    from groundtrace_langchain.guard_middleware import GuardMiddleware

    def agent(answer: str, policy: str) -> Any:
        tool = create_retriever_tool(KeywordRetriever(documents=MUSEUM, k=1), "search_museum", "Search the pages.")
        replies = iter([call("search_museum", query="Larkfield museum entry"), AIMessage(answer)])
        return create_agent(ScriptedChatModel(respond=lambda messages: next(replies)), tools=[tool],
                            middleware=[GuardMiddleware(guard(grounding, policy))])

    state = agent(PLANTED, "redact").invoke(user(QUESTION))
    final = state["messages"][-1]
    assert final.content == REDACTED and final.response_metadata["groundtrace"]["action"] == "redacted"
    assert sum(isinstance(m, AIMessage) and not m.tool_calls for m in state["messages"]) == 1  # replaced, not added
    assert agent(FAITHFUL, "replace").invoke(user(QUESTION))["messages"][-1].content == FAITHFUL
    replaced = asyncio.run(agent(PLANTED, "replace").ainvoke(user(QUESTION)))
    assert replaced["messages"][-1].content == FALLBACK["en"]


def test_a_run_with_nothing_to_check_is_delivered_unchecked_counted_and_said_once(grounding, caplog):
    from groundtrace_langchain import guarded as guarded_module

    guarded_module._SAID.clear()
    checker = guard(grounding, "replace")
    no_retrieval = checker.wrap(PROMPT | model(PLANTED) | StrOutputParser())
    with caplog.at_level("DEBUG", logger="groundtrace"):
        for _ in range(3):
            assert no_retrieval.invoke({"context": "", "question": QUESTION}) == PLANTED
    said = [r for r in caplog.records if "made no record to check" in r.getMessage()]
    assert [r.levelname for r in said] == ["WARNING", "DEBUG", "DEBUG"]
    assert "no retrieval" in said[0].getMessage()
    assert checker.stats == {"checked": 3, "unchecked": 3}
