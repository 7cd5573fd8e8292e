"""Latency that groundtrace_llamaindex.instrument() adds to each LlamaIndex query.

    python integrations/llamaindex/benchmarks/overhead.py [--queries 50] [--rounds 40] [--streaming] [--agent]

A real query engine (a VectorStoreIndex over a few Russian and English documents, MockEmbedding,
and an LLM with a fixed answer, so that no network or model time hides the adapter's cost) answers
the same questions in three setups, in alternating rounds so that drift hits all three alike.
``--agent``: a FunctionAgent instead, whose scripted function-calling model asks once for a
FunctionTool that retrieves from the same index, then answers (two model calls, one tool call and
one retrieval per turn; ``--streaming`` streams the model's replies). The setups:

    baseline   not instrumented
    capture    instrumented; every Record is built and submitted, then sampled out (sample_rate=0):
               the adapter's own cost on the request path
    scored     instrumented; every Record is scored with metrics=["lexical"] by a real Monitor's
               background worker while the queries run (it competes for the CPU, as in production)

It prints the median and p95 latency per query of each setup and what instrumenting adds; then,
since on a shared machine other work moves those medians by more than the adapter costs, the
adapter's own time measured from inside: the time spent in its two handlers (every span start,
exit and event, and building and submitting the Record) per request, median and minimum over
``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from groundtrace.monitor import Monitor
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

import groundtrace_llamaindex
from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler

DOCUMENTS = [
    "Плата за проживание в общежитии СПбГУ составляет 1 879 рублей в месяц.",
    "The dormitory fee at Saint Petersburg State University is 1,879 rubles per month.",
    "Казань — столица Республики Татарстан.",
    "Paris is the capital of France.",
    "Заявление на место в общежитии подают до 1 сентября через личный кабинет.",
    "Students apply for a dormitory place through their personal account before September 1.",
]
ANSWER = "Плата за проживание в общежитии СПбГУ составляет 1 879 рублей в месяц."
QUESTIONS = ["Сколько стоит общежитие?", "How much is the dormitory?", "Когда подавать заявление?"]


class FixedLLM(CustomLLM):
    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fixed")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=ANSWER)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        def tokens():
            text = ""
            for word in ANSWER.split(" "):
                delta = word if not text else " " + word
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return tokens()


def agent_reply(messages: Any, **kwargs: Any) -> ChatMessage:
    """The agent's model: ask for the search tool, then, with its output in the input, answer."""
    if messages and messages[-1].role == MessageRole.TOOL:
        return ChatMessage(role=MessageRole.ASSISTANT, content=ANSWER)
    call = ToolCallBlock(tool_call_id="call-1", tool_name="search_docs", tool_kwargs={"query": "dormitory fee"})
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


class AgentEngine:
    """An agent answering like a query engine: ``query(question)`` runs one turn on one event loop."""

    def __init__(self, index: VectorStoreIndex, streaming: bool) -> None:
        retriever = index.as_retriever(similarity_top_k=2)

        def search_docs(query: str) -> str:
            """Search the university's documents."""
            return "\n\n".join(node.node.get_content() for node in retriever.retrieve(query))

        self.agent = FunctionAgent(tools=[FunctionTool.from_defaults(search_docs)], streaming=streaming,
                                   llm=MockFunctionCallingLLM(response_generator=agent_reply))
        self.loop = asyncio.new_event_loop()

    def query(self, question: str) -> str:
        return str(self.loop.run_until_complete(self._turn(question)))

    async def _turn(self, question: str) -> Any:
        return await self.agent.run(user_msg=question)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def timed_queries(engine: Any, count: int, streaming: bool) -> list[float]:
    streaming = streaming and not isinstance(engine, AgentEngine)  # an agent's answer comes whole
    latencies = []
    for i in range(count):
        started = time.perf_counter()
        response = engine.query(QUESTIONS[i % len(QUESTIONS)])
        if streaming:
            "".join(response.response_gen)
        latencies.append((time.perf_counter() - started) * 1e3)
    return latencies


class HandlerClock:
    """Adds up the time spent inside groundtrace's handler methods while it is installed."""

    # what LlamaIndex's dispatcher calls (span_enter & co. call new_span & co. in the base class)
    METHODS = {GroundtraceSpanHandler: ("span_enter", "span_exit", "span_drop"),
               GroundtraceEventHandler: ("handle",)}

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: list[tuple[type, str, Any]] = []

    def __enter__(self) -> HandlerClock:
        for cls, names in self.METHODS.items():
            for name in names:
                method = getattr(cls, name)
                self._saved.append((cls, name, method))
                setattr(cls, name, self._timed(method))
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, method in self._saved:
            setattr(cls, name, method)

    def _timed(self, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


def handler_time(engine: Any, rounds: int, count: int, streaming: bool) -> list[float]:
    """ms spent inside the handlers per request, one value per round (sampled out: no scoring)."""
    monitor = Monitor(metrics=["lexical"], sinks="none", sample_rate=0.0, flush_at_exit=False)
    per_round = []
    groundtrace_llamaindex.instrument(monitor=monitor)
    try:
        with HandlerClock() as clock:
            for _ in range(rounds):
                clock.seconds = 0.0
                timed_queries(engine, count, streaming)
                per_round.append(clock.seconds / count * 1e3)
    finally:
        groundtrace_llamaindex.uninstrument()
        monitor.close()
    return per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=50, help="queries per setup per round")
    parser.add_argument("--rounds", type=int, default=40, help="short rounds spread drift evenly")
    parser.add_argument("--streaming", action="store_true", help="streaming query engine, read to the end")
    parser.add_argument("--agent", action="store_true", help="a FunctionAgent with a retrieving tool")
    args = parser.parse_args()

    Settings.llm, Settings.embed_model = FixedLLM(), MockEmbedding(embed_dim=8)
    documents = [Document(text=text) for text in DOCUMENTS]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    engine: Any = (AgentEngine(index, args.streaming) if args.agent else
                   index.as_query_engine(llm=FixedLLM(), similarity_top_k=2, streaming=args.streaming))
    timed_queries(engine, 50, args.streaming)  # warm up imports, caches, the tokenizer

    monitors = {"capture": Monitor(metrics=["lexical"], sinks="none", sample_rate=0.0, flush_at_exit=False),
                "scored": Monitor(metrics=["lexical"], sinks="none", flush_at_exit=False)}
    latencies: dict[str, list[float]] = {"baseline": [], "capture": [], "scored": []}
    for _ in range(args.rounds):
        for setup in latencies:
            if setup != "baseline":
                groundtrace_llamaindex.instrument(monitor=monitors[setup])
            latencies[setup] += timed_queries(engine, args.queries, args.streaming)
            groundtrace_llamaindex.uninstrument()
            if setup != "baseline":
                monitors[setup].flush(120)  # the backlog is scored before the next setup is timed

    kind = "streaming queries read to the end" if args.streaming else "queries"
    if args.agent:
        kind = "agent turns (tool call, retrieval, two model calls)" + (", streamed" if args.streaming else "")
    print(f"{args.rounds} rounds x {args.queries} {kind} per setup; latency per query in ms")
    print(f"{'setup':<10} {'median':>8} {'p95':>8} {'added median':>13} {'added p95':>10}")
    base_median, base_p95 = statistics.median(latencies["baseline"]), percentile(latencies["baseline"], 0.95)
    for setup, values in latencies.items():
        median, p95 = statistics.median(values), percentile(values, 0.95)
        print(f"{setup:<10} {median:8.3f} {p95:8.3f} {median - base_median:+13.3f} {p95 - base_p95:+10.3f}")
    for setup, monitor in monitors.items():
        stats = monitor.stats
        print(f"{setup} monitor: submitted {stats.submitted}, scored {stats.scored}, sampled out {stats.sampled_out}, "
              f"dropped {stats.dropped}, scoring p50 {stats.latency_ms_p50 or 0:.2f} ms")
        monitor.close()
    inside = handler_time(engine, args.rounds, args.queries, args.streaming)
    print(f"inside the handlers, per request: median {statistics.median(inside):.3f} ms, "
          f"min {min(inside):.3f} ms (over {args.rounds} rounds)")


if __name__ == "__main__":
    main()
