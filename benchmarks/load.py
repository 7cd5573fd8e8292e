"""The application's speed under load with groundtrace attached, and what groundtrace costs it per call.

    python benchmarks/load.py [--threads 8] [--calls 60] [--rounds 5] [--cpu-calls 300] [--cpu-rounds 3]
                              [--variants none,callbacks,...] [--app lcel_rag] [--cpu-budget 0.1,0.25]

1. Under load: ``--threads`` threads each call the application ``--calls`` times; its model step
   waits 10 ms, like a fast hosted model. Each round runs every variant once, in a random order:
   no handler; the callbacks only (a Monitor with sample_rate=0: every record sampled out); the
   handler with Monitor(["lexical"]) in isolation "thread" and "process" (the default); the same
   with "grounding". Each variant gets a fresh Monitor whose scoring process is started and warm
   before its clock starts, and is closed (and its scoring stopped) before the next variant runs.
   With ``--cpu-budget`` (default 0.25 of a core; several, comma-separated) the process variants run
   once more under each budget. Printed: the app's p50 and p99 per call (the median over rounds) and their difference
   from no handler (the median over rounds of the ratio to no handler in the same round: the
   machine's load drifts between rounds), the app process's CPU per call (all its threads, not the scoring process), the
   CPU groundtrace reports for its workers and scoring processes (stats.cpu_s, in cores), and the
   Monitor's counters when the last call returned, summed over rounds ("queued": still waiting or
   in a worker's hands then; what is still queued is dropped when the variant is stopped).
2. CPU per call, one thread, no wait (``--cpu-calls`` calls per block, blocks interleaved, median
   of ``--cpu-rounds``): the application alone, with the callbacks, and with every record scored
   by ``lexical`` (the block ends when the Monitor has settled every record). The difference between
   the last two is the app-side cost of a scored record: time.process_time() counts every thread
   of this process (the Monitor's worker included) and none of the scoring process's; the worker
   thread's own share is read from /proc (Linux). The scored variants run once more with the Monitor's
   metrics on an SDK MeterProvider (groundtrace.telemetry): the difference is what they cost per
   scored record.

An application shape is a function ``shape(wait_s) -> App`` in APPS: ``lcel_rag`` (the chain
above) and ``langgraph_agent`` (langchain's create_agent with a retriever tool: two model calls per
question, each waiting 10 ms). Every number comes from one run on one machine:
compare variants within a run, never across runs or machines.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundtrace.monitor import Monitor
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from groundtrace_langchain import GroundtraceCallbackHandler

# ------------------------------------------------------------------------------------ the applications
PASSAGES = [
    ("Paris is the capital of France. It lies on the Seine and has about two million inhabitants.",
     "What is the capital of France?", "Paris is the capital of France."),
    ("The Eiffel Tower in Paris was completed in 1889 for the World's Fair and is 330 metres tall.",
     "When was the Eiffel Tower completed?", "The Eiffel Tower was completed in 1889."),
    ("Lake Baikal in Siberia is the deepest lake in the world, at 1,642 metres.",
     "How deep is Lake Baikal?", "Lake Baikal is 1,642 metres deep."),
    ("The dormitory fee is 1,879 roubles per month, paid at the start of each term.",
     "How much is the dormitory fee?", "The dormitory fee is 2,500 roubles per month."),
    ("Items can be returned within 30 days of delivery if they are unused and in their packaging.",
     "How long do I have to return an item?", "You can return items within 30 days of delivery."),
    ("The library opens at 9 am and closes at 8 pm on weekdays; on Saturdays it closes at 5 pm.",
     "When does the library close on Saturdays?", "On Saturdays the library closes at 5 pm."),
]


@dataclass
class App:
    """An application under test: ``invoke(question, callbacks)``, and the questions to ask it."""

    invoke: Callable[[str, list[Any]], Any]
    questions: list[str]


class WordRetriever(BaseRetriever):
    """The passages sharing most words with the query (a real retriever's plumbing, no index)."""

    documents: list[Document]
    k: int = 2

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        wanted = set(query.lower().split())
        ranked = sorted(self.documents, key=lambda d: -len(wanted & set(d.page_content.lower().split())))
        return ranked[: self.k]


def lcel_rag(wait_s: float) -> App:
    """retriever | prompt | a step that waits ``wait_s`` (the model's latency) | chat model | parser."""
    documents = [Document(page_content=text, metadata={"source": f"doc{i}.md"}, id=f"doc{i}")
                 for i, (text, _, _) in enumerate(PASSAGES)]
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from these passages only:\n{context}"),
                                               ("human", "{question}")])

    def wait(messages: Any) -> Any:
        if wait_s:
            time.sleep(wait_s)
        return messages

    model = FakeListChatModel(responses=[answer for _, _, answer in PASSAGES])
    join = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    chain = ({"context": WordRetriever(documents=documents) | join, "question": RunnablePassthrough()}
             | prompt | RunnableLambda(wait, name="model_latency") | model | StrOutputParser())
    return App(lambda question, callbacks: chain.invoke(question, config={"callbacks": callbacks}),
               [question for _, question, _ in PASSAGES])


class ScriptedAgentModel(BaseChatModel):
    """A tool-calling agent's model: asks the search tool with the user's words, then answers from
    what the tool returned (the planted answer of the passage found). Each call waits ``wait_s``."""

    wait_s: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedAgentModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.wait_s:
            time.sleep(self.wait_s)
        last = messages[-1]
        if isinstance(last, ToolMessage):
            found = str(last.content)
            answer = next((a for text, _, a in PASSAGES if text in found), "I do not know.")
            reply = AIMessage(answer)
        else:
            query = str(last.content)
            reply = AIMessage("", tool_calls=[{"name": "search_passages", "args": {"query": query}, "id": "call_1"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def langgraph_agent(wait_s: float) -> App:
    """langchain's create_agent (a LangGraph graph) with a retriever tool: two model calls per
    question (a tool call, then the answer), each waiting ``wait_s``."""
    from langchain.agents import create_agent
    from langchain_core.tools import create_retriever_tool

    documents = [Document(page_content=text, metadata={"source": f"doc{i}.md"}, id=f"doc{i}")
                 for i, (text, _, _) in enumerate(PASSAGES)]
    search = create_retriever_tool(WordRetriever(documents=documents, k=1), "search_passages", "Search the passages.")
    agent = create_agent(ScriptedAgentModel(wait_s=wait_s), tools=[search], system_prompt="Answer from the passages.")
    return App(lambda question, callbacks: agent.invoke({"messages": [{"role": "user", "content": question}]},
                                                        config={"callbacks": callbacks}),
               [question for _, question, _ in PASSAGES])


APPS: dict[str, Callable[[float], App]] = {"lcel_rag": lcel_rag, "langgraph_agent": langgraph_agent}


# ------------------------------------------------------------------------------------ what is attached
@dataclass
class Variant:
    """What is attached to the application: nothing, or a handler over a fresh Monitor."""

    name: str
    monitor: Callable[[], Monitor] | None = None


def monitor_factory(metric: str | None, isolation: str, budget: float | None, **extra: Any) -> Callable[[], Monitor]:
    def build() -> Monitor:
        options: dict[str, Any] = {"cpu_budget": budget} if budget is not None else {}
        if metric is None:  # the callbacks only: every record is sampled out at submit
            return Monitor(["lexical"], [], sample_rate=0.0, isolation="thread", flush_at_exit=False)
        return Monitor([metric], [], isolation=isolation, flush_at_exit=False, **options, **extra)

    return build


def variants(budgets: list[float]) -> dict[str, Variant]:
    """Every variant; the process variants once more under each Monitor(cpu_budget=...)."""
    found = [Variant("none"), Variant("callbacks", monitor_factory(None, "thread", None))]
    for metric in ("lexical", "grounding"):
        for isolation in ("thread", "process"):
            found.append(Variant(f"{metric}/{isolation}", monitor_factory(metric, isolation, None)))
        for budget in budgets:
            found.append(Variant(f"{metric}/process@{budget:g}", monitor_factory(metric, "process", budget)))
    return {v.name: v for v in found}


def warm(monitor: Monitor, app: App) -> None:
    """The scoring process started and every import done before the clock starts."""
    app.invoke(app.questions[0], [GroundtraceCallbackHandler(monitor=monitor)])
    monitor.flush(120)


def stop(monitor: Monitor) -> None:
    """Close, drop what is queued, and wait until no record is in a worker's hands: nothing of this
    variant may keep scoring while the next one is timed."""
    monitor.close(timeout=0)
    deadline = time.monotonic() + 120
    while monitor.stats.queued and time.monotonic() < deadline:
        time.sleep(0.05)


# ------------------------------------------------------------------------------------ 1. under load
COUNTERS = ("submitted", "scored", "dropped", "sampled_out", "over_budget", "failed", "queued")


@dataclass
class LoadResult:
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    cpu_per_call: list[float] = field(default_factory=list)
    scoring_cores: list[float] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def run_load(app: App, variant: Variant, threads: int, calls: int, result: LoadResult) -> None:
    monitor = variant.monitor() if variant.monitor else None
    callbacks = [GroundtraceCallbackHandler(monitor=monitor)] if monitor else []
    if monitor is not None:
        warm(monitor, app)
        before = monitor.stats
    latencies: list[list[float]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def caller(k: int) -> None:
        questions = app.questions
        barrier.wait()
        for i in range(calls):
            started = time.perf_counter()
            app.invoke(questions[(k + i) % len(questions)], callbacks)
            latencies[k].append((time.perf_counter() - started) * 1000.0)

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    gc.collect()
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    barrier.wait()
    for worker in workers:
        worker.join()
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - wall_started
    every = [latency for per_thread in latencies for latency in per_thread]
    result.p50.append(statistics.median(every))
    result.p99.append(percentile(every, 0.99))
    result.cpu_per_call.append(cpu * 1000.0 / len(every))
    if monitor is not None:  # the counters when the last call returned; what is still queued then is
        after = monitor.stats.as_dict()  # dropped by stop(), not counted here
        stop(monitor)
        result.scoring_cores.append((after.get("cpu_s", 0.0) - before.as_dict().get("cpu_s", 0.0)) / wall)
        for name in COUNTERS:
            result.counts[name] += after.get(name, 0) - (0 if name == "queued" else before.as_dict().get(name, 0))


def load_section(app_shape: str, chosen: list[Variant], threads: int, calls: int, rounds: int) -> None:
    app = APPS[app_shape](0.010)
    results = {v.name: LoadResult() for v in chosen}
    order = list(chosen)
    shuffle = random.Random(24).shuffle
    for round_number in range(rounds):
        shuffle(order)
        print(f"  round {round_number + 1}: {', '.join(v.name for v in order)} (load average "
              f"{os.getloadavg()[0]:.2f})", flush=True)
        for variant in order:
            run_load(app, variant, threads, calls, results[variant.name])
    base = results.get("none")

    def versus(mine: list[float], theirs: list[float] | None) -> str:
        """The median over rounds of this round's ratio to no handler's in the same round (paired:
        the machine's load drifts between rounds, less within one)."""
        if not theirs or mine is theirs:
            return "—"
        return f"{100 * (statistics.median(a / b for a, b in zip(mine, theirs, strict=True)) - 1):+.1f}%"
    print(f"\n{app_shape}, {threads} threads x {calls} calls, {rounds} rounds (medians over rounds):")
    print(f"| {'attached':<24} | app p50 ms | vs none | app p99 ms | vs none | app CPU ms/call | scoring cores | "
          + " | ".join(COUNTERS) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(COUNTERS))
    for variant in chosen:
        r = results[variant.name]
        p50, p99, cpu = statistics.median(r.p50), statistics.median(r.p99), statistics.median(r.cpu_per_call)
        vs50, vs99 = versus(r.p50, base.p50 if base else None), versus(r.p99, base.p99 if base else None)
        counts = " | ".join(f"{r.counts[name]:,}" if variant.monitor else "—" for name in COUNTERS)
        cores = f"{statistics.median(r.scoring_cores):.2f}" if r.scoring_cores else "—"
        print(f"| {variant.name:<24} | {p50:10.1f} | {vs50:>7} | {p99:10.1f} | {vs99:>7} | {cpu:15.2f} | {cores:>13} | "
              f"{counts} |")


# ------------------------------------------------------------------------------------ 2. CPU per call
def worker_cpu_s() -> float | None:
    """CPU seconds of the Monitors' worker threads so far (Linux /proc; None elsewhere)."""
    total = 0.0
    try:
        for thread in threading.enumerate():
            if thread.name.startswith("groundtrace-worker") and thread.native_id is not None:
                with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


def cpu_block(app: App, monitor: Monitor | None, calls: int) -> tuple[float, float | None, dict[str, Any] | None]:
    """CPU ms per call of this process over ``calls`` calls, waiting for every record to settle; of
    that, the Monitors' worker threads' (ms per call); the Monitor's counters."""
    callbacks = [GroundtraceCallbackHandler(monitor=monitor)] if monitor else []
    before = monitor.stats.as_dict() if monitor else None
    gc.collect()
    workers_before = worker_cpu_s()
    started = time.process_time()
    for i in range(calls):
        app.invoke(app.questions[i % len(app.questions)], callbacks)
    if monitor is not None:
        monitor.flush(300)
    cpu = (time.process_time() - started) * 1000.0 / calls
    workers_after = worker_cpu_s()
    workers = None if workers_before is None or workers_after is None else \
        (workers_after - workers_before) * 1000.0 / calls
    counts = None
    if monitor is not None and before is not None:
        after = monitor.stats.as_dict()
        counts = {name: after.get(name, 0) - before.get(name, 0) for name in COUNTERS}
    return cpu, workers, counts


def cpu_section(app_shape: str, calls: int, rounds: int) -> None:
    app = APPS[app_shape](0.0)
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    provider = MeterProvider([InMemoryMetricReader()])  # the Monitor's metrics (groundtrace.telemetry) on an SDK
    monitors: dict[str, Monitor | None] = {
        "langchain alone": None,
        "+ callbacks (sampled out)": monitor_factory(None, "thread", None)(),
        "+ scored, lexical/process": monitor_factory("lexical", "process", None, queue_size=calls + 10,
                                                     telemetry="none")(),
        "+ scored, lexical/thread": monitor_factory("lexical", "thread", None, queue_size=calls + 10,
                                                    telemetry="none")(),
        "+ scored, lexical/process, metrics": monitor_factory("lexical", "process", None, queue_size=calls + 10,
                                                              telemetry=provider)(),
        "+ scored, lexical/thread, metrics": monitor_factory("lexical", "thread", None, queue_size=calls + 10,
                                                             telemetry=provider)(),
    }
    for monitor in monitors.values():
        if monitor is not None:
            warm(monitor, app)
    for _ in range(20):
        app.invoke(app.questions[0], [])
    cpu: dict[str, list[float]] = {name: [] for name in monitors}
    workers: dict[str, list[float]] = {name: [] for name in monitors}
    unsettled = 0
    order = list(monitors)
    shuffle = random.Random(7).shuffle
    for _ in range(rounds):
        shuffle(order)
        for name in order:
            per_call, worker, counts = cpu_block(app, monitors[name], calls)
            cpu[name].append(per_call)
            if worker is not None:
                workers[name].append(worker)
            if counts is not None and name.startswith("+ scored"):
                unsettled += calls - counts["scored"]
    for monitor in monitors.values():
        if monitor is not None:
            monitor.close()
    median = {name: statistics.median(values) for name, values in cpu.items()}
    alone, callbacks = median["langchain alone"], median["+ callbacks (sampled out)"]
    print(f"\nCPU per call of this process, one thread, no wait ({calls} calls per block, median of {rounds} blocks):")
    print("| | CPU ms/call | added | of which the Monitor's worker thread |")
    print("|---|---:|---:|---:|")
    print(f"| langchain alone | {alone:.3f} | — | — |")
    print(f"| + callbacks (every record sampled out) | {callbacks:.3f} | {callbacks - alone:+.3f} vs alone | — |")
    for name in ("+ scored, lexical/process", "+ scored, lexical/thread"):
        worker = f"{statistics.median(workers[name]):.3f}" if workers[name] else "—"
        print(f"| {name} | {median[name]:.3f} | {median[name] - callbacks:+.3f} vs callbacks (per scored record) "
              f"| {worker} |")
    for name in ("+ scored, lexical/process, metrics", "+ scored, lexical/thread, metrics"):
        worker = f"{statistics.median(workers[name]):.3f}" if workers[name] else "—"
        without = name.removesuffix(", metrics")
        print(f"| {name} | {median[name]:.3f} | {median[name] - median[without]:+.3f} vs without metrics "
              f"| {worker} |")
    if unsettled:
        print(f"  warning: {unsettled} records of the scored blocks were not scored (see the Monitor's counters)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default="lcel_rag", choices=sorted(APPS))
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--calls", type=int, default=60, help="calls per thread per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default=None, help="comma-separated subset of: " + ", ".join(variants([0.25])))
    parser.add_argument("--cpu-budget", default="0.25",
                        help="comma-separated shares of a core: the process variants once more with each "
                             "Monitor(cpu_budget=...) (0: none)")
    parser.add_argument("--cpu-calls", type=int, default=300, help="calls per block of the CPU section (0: skip it)")
    parser.add_argument("--cpu-rounds", type=int, default=3)
    args = parser.parse_args()
    known = variants([float(b) for b in args.cpu_budget.split(",") if float(b) > 0])
    names = args.variants.split(",") if args.variants else list(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(known)}")
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    started = time.perf_counter()
    load_section(args.app, [known[name] for name in names], args.threads, args.calls, args.rounds)
    if args.cpu_calls:
        cpu_section(args.app, args.cpu_calls, args.cpu_rounds)
    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; "
          f"{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
