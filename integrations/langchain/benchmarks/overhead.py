"""Latency the GroundtraceCallbackHandler adds to a LangChain RAG chain and to an agent, with every
record scored.

    python integrations/langchain/benchmarks/overhead.py [--n 2000] [--warmup 200] [--only chain|agent]
        [--baseline GIT_REF]

The chain is retriever -> prompt -> chat model -> str parser, with a fake chat model that answers at
once (~0 ms) and one that sleeps 10 ms. The agent is langchain's create_agent with a retriever tool
and a scripted chat model (it calls the tool, then answers: two model calls, a tool call and a
retrieval per invocation), answering at once or sleeping 10 ms per call. Invocations without a
handler, with an empty handler (what LangChain charges for any handler) and with the
GroundtraceCallbackHandler are interleaved in a random order per round, so that drift, caches and
the Monitor's background scoring fall on all of them alike. Every record is scored by a real Monitor (metrics=["lexical"]) whose queue is large
enough that none is dropped; the script checks that. Goal: median added latency <= 0.3 ms and
<= 3 % of the invocation.

Besides wall-clock latency it prints the added CPU time of the calling thread (insensitive to other
processes on the machine) and the throughput of a block of invocations that waits for its scores:
the Monitor scores in a thread of the same process, so its CPU competes with requests for the GIL.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import os
import platform
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from groundtrace.monitor import Monitor
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from groundtrace_langchain import GroundtraceCallbackHandler

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
PASSAGES = [
    Document(page_content="Paris is the capital of France.", metadata={"source": "france.md"}, id="en-paris"),
    Document(page_content="The Eiffel Tower in Paris was completed in 1889.", metadata={"source": "paris.md"},
             id="en-eiffel"),
]
GOAL_MS, GOAL_SHARE = 0.3, 0.03


class FirstPassagesRetriever(BaseRetriever):
    """Returns the first k passages: retrieval itself costs nothing, only LangChain's plumbing."""

    documents: list[Document]
    k: int = 2

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.documents[: self.k]


class TenMillisecondChatModel(FakeListChatModel):
    """A chat model that takes 10 ms to answer, like a fast real one."""

    def _call(self, *args: Any, **kwargs: Any) -> str:
        time.sleep(0.010)
        return super()._call(*args, **kwargs)


class SearchThenAnswer(BaseChatModel):
    """An agent's model: calls the search tool, then (once it has read the result) answers."""

    delay_s: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "search-then-answer"

    def bind_tools(self, tools: Any, **kwargs: Any) -> SearchThenAnswer:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.delay_s:
            time.sleep(self.delay_s)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(ANSWER)
        else:
            reply = AIMessage("", tool_calls=[{"name": "search_passages", "args": {"query": "capital of France"},
                                               "id": "call_1"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def rag_agent(llm: Any) -> Runnable:
    from langchain.agents import create_agent
    from langchain_core.tools import create_retriever_tool

    search = create_retriever_tool(FirstPassagesRetriever(documents=PASSAGES), "search_passages",
                                   "Search the passages.")
    return create_agent(llm, tools=[search], system_prompt="Answer from the passages.")


def rag_chain(llm: Any) -> Runnable:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
    join = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    context = FirstPassagesRetriever(documents=PASSAGES) | join
    return {"context": context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


class EmptyHandler(BaseCallbackHandler):
    """A handler that asks for no event at all: what LangChain charges for any handler."""

    run_inline = True
    ignore_llm = ignore_chain = ignore_agent = ignore_retriever = ignore_chat_model = True
    ignore_retry = ignore_custom_event = True


def baseline_handler(ref: str) -> type:
    """GroundtraceCallbackHandler as it was at git ``ref``: its package copied out of the repository
    under another name (groundtrace_langchain_baseline), so that both run in one process, on the
    same invocations, interleaved; before/after numbers from two runs on a shared machine differ
    by more than the change."""
    repository = Path(__file__).resolve().parents[3]
    package = "integrations/langchain/src/groundtrace_langchain"
    archive = subprocess.run(["git", "-C", str(repository), "archive", ref, package], capture_output=True, check=True)
    target = Path(tempfile.mkdtemp(prefix="groundtrace-baseline-")) / "groundtrace_langchain_baseline"
    target.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as files:
        for member in files.getmembers():
            source = files.extractfile(member) if member.isfile() else None
            if source is not None and member.name.endswith(".py"):
                text = source.read().decode("utf-8").replace("groundtrace_langchain", "groundtrace_langchain_baseline")
                (target / Path(member.name).name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(target.parent))
    return importlib.import_module("groundtrace_langchain_baseline").GroundtraceCallbackHandler


def measure(name: str, chain: Runnable, question: Any, n: int, warmup: int, baseline: type | None = None) -> dict:
    arm_count = 3 if baseline is None else 4
    monitor = Monitor(metrics=["lexical"], sinks="none", queue_size=arm_count * (n + warmup), flush_at_exit=False)
    arms = {
        "without": {"callbacks": []},
        "empty": {"callbacks": [EmptyHandler()]},
        "groundtrace": {"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]},
    }
    if baseline is not None:
        arms["baseline"] = {"callbacks": [baseline(monitor=monitor)]}
    wall: dict[str, list[float]] = {arm: [] for arm in arms}
    cpu: dict[str, list[float]] = {arm: [] for arm in arms}

    def timed(arm: str) -> None:
        started, started_cpu = time.perf_counter(), time.thread_time()
        chain.invoke(question, config=arms[arm])
        wall[arm].append((time.perf_counter() - started) * 1000.0)
        cpu[arm].append((time.thread_time() - started_cpu) * 1000.0)

    # a fresh random order of the arms in every round: each arm is as likely as any other to run
    # right after a record was submitted, when the Monitor's worker wakes up to score it
    order, shuffle = list(arms), random.Random(0).shuffle
    for i in range(warmup + n):
        if i == warmup:
            monitor.flush(60)
            for runs in (*wall.values(), *cpu.values()):
                runs.clear()
            gc.collect()
        shuffle(order)
        for arm in order:
            timed(arm)
    assert monitor.flush(120), "the Monitor did not finish scoring"

    # The same work in two blocks, the handler's block waiting for its last score: what in-process
    # scoring costs the application in throughput (its CPU shares the GIL with the requests).
    blocks = {}
    for arm in ("without", "groundtrace"):
        started = time.perf_counter()
        for _ in range(n // 4):
            chain.invoke(question, config=arms[arm])
        monitor.flush(120)
        blocks[arm] = time.perf_counter() - started
    stats = monitor.stats
    monitor.close()
    expected = (warmup + n) * (1 if baseline is None else 2) + n // 4
    assert (stats.scored, stats.dropped, stats.failed) == (expected, 0, 0), f"not every record was scored: {stats}"

    base, base_cpu = statistics.median(wall["without"]), statistics.median(cpu["without"])
    print(f"{name}: invocation without a handler {base:.3f} ms (median), p95 "
          f"{percentile(wall['without'], 0.95):.3f} ms; CPU of the calling thread {base_cpu:.3f} ms")
    result = {}
    labels = [("groundtrace", "GroundtraceCallbackHandler"), ("empty", "an empty handler (LangChain's floor)")]
    if baseline is not None:
        labels.insert(1, ("baseline", "the handler at the baseline commit"))
    for arm, label in labels:
        added = statistics.median(wall[arm]) - base
        added_cpu = statistics.median(cpu[arm]) - base_cpu
        p95_added = percentile(wall[arm], 0.95) - percentile(wall["without"], 0.95)
        verdict = ("meets" if added <= GOAL_MS and added / base <= GOAL_SHARE else "misses") + " the goal"
        print(f"  {label}: added latency median {added:+.3f} ms ({100 * added / base:+.1f} %), p95 {p95_added:+.3f} ms"
              f"{'; ' + verdict if arm == 'groundtrace' else ''}; added CPU {added_cpu:+.3f} ms "
              f"({100 * added_cpu / base_cpu:+.1f} %)")
        result[arm] = {"added_ms": added, "added_cpu_ms": added_cpu}
    print(f"  throughput, {n // 4} invocations in a block: {blocks['without']:.2f} s without, {blocks['groundtrace']:.2f} s "
          f"with the handler, waiting for every score ({100 * (blocks['groundtrace'] / blocks['without'] - 1):+.1f} %)")
    print(f"  scored in the background: {stats.scored} records, {stats.latency_ms_p50:.2f} ms each (p50), none dropped")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="invocations with, and as many without, per model")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--only", choices=["chain", "agent"], default=None)
    parser.add_argument("--baseline", metavar="GIT_REF", default=None,
                        help="also time the handler as it was at this commit, interleaved with the others")
    args = parser.parse_args()
    baseline = baseline_handler(args.baseline) if args.baseline else None
    print(f"{args.n} invocations with and {args.n} without the handler per model, interleaved; "
          f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    if args.only in (None, "chain"):
        measure("chain, 0 ms model", rag_chain(FakeListChatModel(responses=[ANSWER])), QUESTION, args.n, args.warmup,
                baseline)
        measure("chain, 10 ms model", rag_chain(TenMillisecondChatModel(responses=[ANSWER])), QUESTION, args.n,
                args.warmup, baseline)
    if args.only in (None, "agent"):
        agent_input = {"messages": [{"role": "user", "content": QUESTION}]}
        measure("agent, 0 ms model", rag_agent(SearchThenAnswer()), agent_input, args.n, args.warmup, baseline)
        measure("agent, 10 ms per model call", rag_agent(SearchThenAnswer(delay_s=0.010)), agent_input, args.n,
                args.warmup, baseline)


if __name__ == "__main__":
    main()
