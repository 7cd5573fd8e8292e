"""CPU that groundtrace's callbacks take from the application's own thread, per request, and where
it goes: the LangChain handler on a RAG chain and on an agent, the LlamaIndex handlers on a query
engine and on a FunctionAgent.

    python benchmarks/callback_cpu.py [--cases chain,agent,li-query,li-agent] [--n 2000]
        [--sample-rate 0] [--baseline GIT_REF] [--parts-n 1000]

1. Added CPU per request: every request runs with no handler, with a handler that does nothing
   (what the framework charges for any handler: its floor), with groundtrace's and, with
   ``--baseline``, with groundtrace's integration package as it was at GIT_REF (copied out of git
   under another name, beside today's core), in a fresh random order per round, in one process:
   medians of ``time.thread_time`` per request, minus the median without a handler. The Monitor
   samples every record out by default (``--sample-rate 0``), so only the callback path is timed;
   a record it keeps is built by its worker thread, off the application's thread, whose CPU is
   reported apart (3.).
2. Where it goes: ``time.thread_time`` around each callback (and around the Record's reading at the
   root's end and Monitor.submit inside them) in real requests, exclusive of the parts nested in
   it; the timer's own cost (measured at start: about 0.4 µs per timed call, 0.7 µs charged to the
   enclosing one) is subtracted.
3. The Monitor's worker: the CPU of building one kept Record (the contexts chosen, the Record
   validated), with ``sample_rate=1``.

The chain is retriever -> prompt -> chat model -> parser (integrations/langchain/benchmarks/
overhead.py); the agent is langchain's create_agent with a retriever tool and a scripted model (two
model calls, a tool call, a retrieval); the LlamaIndex cases are those of
integrations/llamaindex/benchmarks/overhead.py (a query engine over six documents, a FunctionAgent
whose tool retrieves from the same index). Every model answers at once: what is timed is the
framework and the callbacks.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import io
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def overhead_script(integration: str) -> Any:
    """integrations/<integration>/benchmarks/overhead.py, whose applications are timed here."""
    path = ROOT / "integrations" / integration / "benchmarks" / "overhead.py"
    spec = importlib.util.spec_from_file_location(f"{integration}_overhead", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------- the timer
class PartClock:
    """Adds up thread CPU inside wrapped callables, each exclusive of the wrapped ones it calls."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.children: dict[str, int] = defaultdict(int)  # timed calls made from inside each part
        self._stack: list[list[Any]] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self.own_ns, self.parent_ns = 0.0, 0.0

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if original is None:
            return
        self._saved.append((owner, name, original))
        function = original.__func__ if isinstance(original, (classmethod, staticmethod)) else original
        clock, now = self, time.thread_time_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [label, 0]
            clock._stack.append(frame)
            started = now()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = now() - started
                clock._stack.pop()
                clock.ns[label] += elapsed - frame[1]
                clock.calls[label] += 1
                if clock._stack:
                    clock._stack[-1][1] += elapsed
                    clock.children[clock._stack[-1][0]] += 1

        wrapped: Any = classmethod(timed) if isinstance(original, classmethod) else timed
        setattr(owner, name, staticmethod(timed) if isinstance(original, staticmethod) else wrapped)

    def unwrap(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def calibrate(self) -> None:
        """The timer's own cost: what one timed call adds to itself and to the call around it."""

        class Probe:
            def outer(self, k: int) -> None:
                for _ in range(k):
                    self.inner()

            def inner(self) -> None:
                pass

        self.wrap(Probe, "outer", "outer")
        self.wrap(Probe, "inner", "inner")
        count = 20_000
        Probe().outer(count)
        self.own_ns = self.ns["inner"] / count
        self.parent_ns = self.ns["outer"] / count
        self.unwrap()
        for table in (self.ns, self.calls, self.children):
            table.clear()

    def corrected_us(self, label: str, requests: int) -> float:
        spent = self.ns[label] - self.own_ns * self.calls[label] - self.parent_ns * self.children[label]
        return spent / requests / 1000.0


# ------------------------------------------------------------------------------------- baselines
def package_at(ref: str, package_dir: str, package: str) -> str:
    """An integration package as it was at git ``ref``, importable under another name beside today's."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, package_dir], capture_output=True, check=True)
    name = f"{package}_at_{ref.replace('~', '_').replace('^', '_')}"
    target = Path(tempfile.mkdtemp(prefix="groundtrace-baseline-")) / name
    target.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as files:
        for member in files.getmembers():
            source = files.extractfile(member) if member.isfile() else None
            if source is not None and member.name.endswith(".py"):
                text = source.read().decode("utf-8").replace(package, name)
                (target / Path(member.name).name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(target.parent))
    return name


# ------------------------------------------------------------------------------------- the cases
class Case:
    """One application and the ways to run one request of it with a given arm attached."""

    name: str
    parts: list[tuple[Any, str, str]]  # (owner, attribute, label) timed in 2.

    def arms(self, monitor: Any, baseline: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def request(self, arm: Any, i: int) -> None:
        raise NotImplementedError


class LangChainCase(Case):
    def __init__(self, kind: str) -> None:
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        lc = overhead_script("langchain")
        self.name = kind
        if kind == "chain":
            self.app, self.input = lc.rag_chain(FakeListChatModel(responses=[lc.ANSWER])), lc.QUESTION
        else:
            self.app = lc.rag_agent(lc.SearchThenAnswer())
            self.input = {"messages": [{"role": "user", "content": lc.QUESTION}]}

    def arms(self, monitor: Any, baseline: str | None) -> dict[str, Any]:
        from langchain_core.callbacks import BaseCallbackHandler

        from groundtrace_langchain import GroundtraceCallbackHandler

        class NoopHandler(BaseCallbackHandler):
            """Takes every event groundtrace's handler takes, and does nothing with it."""

            run_inline = True
            ignore_retry = ignore_custom_event = True
            ignore_llm = ignore_chain = ignore_agent = ignore_retriever = ignore_chat_model = False

        for event in ("on_chain_start", "on_chain_end", "on_chain_error", "on_retriever_start", "on_retriever_end",
                      "on_chat_model_start", "on_llm_start", "on_llm_end", "on_llm_error", "on_tool_start",
                      "on_tool_end"):
            setattr(NoopHandler, event, lambda self, *args, **kwargs: None)
        arms: dict[str, Any] = {"none": [], "noop": [NoopHandler()]}
        if baseline is not None:
            name = package_at(baseline, "integrations/langchain/src/groundtrace_langchain", "groundtrace_langchain")
            old = importlib.import_module(name)
            arms["baseline"] = [old.GroundtraceCallbackHandler(monitor=monitor)]
            self.baseline_modules = [importlib.import_module(f"{name}.handler")]
        arms["groundtrace"] = [GroundtraceCallbackHandler(monitor=monitor)]
        return arms

    def request(self, arm: Any, i: int) -> None:
        self.app.invoke(self.input, config={"callbacks": arm})

    def timed_parts(self, handler_module: Any) -> list[tuple[Any, str, str]]:
        handler = handler_module.GroundtraceCallbackHandler
        parts = [(handler, name, name) for name in ("on_chain_start", "on_chain_end", "on_retriever_start",
                                                   "on_retriever_end", "on_chat_model_start", "on_llm_end",
                                                   "on_tool_start", "on_tool_end")]
        parts += [(handler, "_start_root", "the root's start"), (handler, "_submit", "the root's end")]
        # what the root's end reads or builds on the application's thread: today's read_end, or the
        # whole Record before it
        parts += [(handler_module, "read_end", "reading the end / building the Record"),
                  (handler_module, "build_record", "reading the end / building the Record")]
        return parts


class LlamaIndexCase(Case):
    def __init__(self, kind: str) -> None:
        from llama_index.core import Document, Settings, VectorStoreIndex
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.instrumentation import get_dispatcher

        li = overhead_script("llamaindex")
        self.name = kind
        Settings.llm, Settings.embed_model = li.FixedLLM(), MockEmbedding(embed_dim=8)
        index = VectorStoreIndex.from_documents([Document(text=t) for t in li.DOCUMENTS],
                                                embed_model=MockEmbedding(embed_dim=8))
        self.questions = li.QUESTIONS
        self.engine = (li.AgentEngine(index, False) if kind == "li-agent"
                       else index.as_query_engine(llm=li.FixedLLM(), similarity_top_k=2))
        self.dispatcher = get_dispatcher()
        self.spans, self.events = list(self.dispatcher.span_handlers), list(self.dispatcher.event_handlers)

    def arms(self, monitor: Any, baseline: str | None) -> dict[str, Any]:
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

        from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler
        from groundtrace_llamaindex.tracker import RootTracker

        class NoopSpans(BaseSpanHandler):
            def new_span(self, *args: Any, **kwargs: Any) -> None:
                return None

            def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
                return None

            def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
                return None

            def span_enter(self, *args: Any, **kwargs: Any) -> None:
                return None

            def span_exit(self, *args: Any, **kwargs: Any) -> None:
                return None

        class NoopEvents(BaseEventHandler):
            def handle(self, event: Any, **kwargs: Any) -> None:
                return None

        arms: dict[str, Any] = {"none": None, "noop": (NoopSpans(), NoopEvents())}
        if baseline is not None:
            name = package_at(baseline, "integrations/llamaindex/src/groundtrace_llamaindex", "groundtrace_llamaindex")
            handlers, tracker = importlib.import_module(f"{name}.handlers"), importlib.import_module(f"{name}.tracker")
            old = tracker.RootTracker(monitor)
            arms["baseline"] = (handlers.GroundtraceSpanHandler(old), handlers.GroundtraceEventHandler(tracker=old))
            self.baseline_modules = [handlers, tracker, importlib.import_module(f"{name}.run")]
        now = RootTracker(monitor)
        arms["groundtrace"] = (GroundtraceSpanHandler(now), GroundtraceEventHandler(tracker=now))
        return arms

    def request(self, arm: Any, i: int) -> None:
        # the arm's handlers sit on the root dispatcher for this one request (instrument() puts them there too)
        if arm is not None:
            self.dispatcher.span_handlers = [*self.spans, arm[0]]
            self.dispatcher.event_handlers = [*self.events, arm[1]]
        try:
            self.engine.query(self.questions[i % len(self.questions)])
        finally:
            self.dispatcher.span_handlers, self.dispatcher.event_handlers = self.spans, self.events

    def timed_parts(self, handlers: Any, tracker: Any, run: Any) -> list[tuple[Any, str, str]]:
        spans, events, root = handlers.GroundtraceSpanHandler, handlers.GroundtraceEventHandler, tracker.RootTracker
        parts = [(spans, name, f"span handler: {name}") for name in ("span_enter", "span_exit", "span_drop", "new_span",
                                                                        "prepare_to_exit_span", "prepare_to_drop_span")]
        parts += [(events, "handle", "event handler: handle"), (root, "on_event", "tracker: events read")]
        parts += [(root, "span_started", "tracker: span starts"), (root, "span_exited", "tracker: span ends")]
        parts += [(run.RootRun, "start", "the root's start (RootRun.start)"), (root, "_submit", "the root's end")]
        parts += [(run.RootRun, "read_end", "reading the end / building the Record"),
                  (run.RootRun, "to_record", "reading the end / building the Record")]
        return parts


def make_case(name: str) -> Case:
    return LangChainCase(name) if name in ("chain", "agent") else LlamaIndexCase(name)


# ------------------------------------------------------------------------------------ measuring
def added_cpu(case: Case, arms: dict[str, Any], n: int, warmup: int) -> dict[str, float]:
    """Median thread CPU per request of each arm minus the median with none, in ms."""
    cpu: dict[str, list[float]] = {arm: [] for arm in arms}
    order = list(arms)
    shuffle = random.Random(0).shuffle
    for i in range(warmup + n):
        shuffle(order)
        for arm in order:
            started = time.thread_time()
            case.request(arms[arm], i)
            if i >= warmup:
                cpu[arm].append((time.thread_time() - started) * 1000.0)
    base = statistics.median(cpu["none"])
    return {"none": base, **{arm: statistics.median(values) - base for arm, values in cpu.items() if arm != "none"}}


def parts_table(case: Case, arm: Any, parts: list[tuple[Any, str, str]], n: int) -> dict[str, float]:
    """µs per request in each timed part, the timer's own cost subtracted.

    The timer's cost is measured twice: on a probe in a tight loop (the split between what a timed
    call adds to itself and to the call around it), and in the same requests as the difference
    between blocks of them with and without the timer installed (what it costs among the
    framework's own work, where caches are cold: several times the probe's figure)."""
    from groundtrace.monitor import Monitor

    clock = PartClock()
    clock.calibrate()
    timed: list[float] = []
    untimed: list[float] = []
    block = 20
    for start in range(0, n, block):
        for clocked in (True, False):
            if clocked:
                for owner, name, label in parts:
                    clock.wrap(owner, name, label)
                clock.wrap(Monitor, "submit", "Monitor.submit")
            try:
                for i in range(start, min(n, start + block)):
                    started = time.thread_time_ns()
                    case.request(arm, i)
                    (timed if clocked else untimed).append(time.thread_time_ns() - started)
            finally:
                clock.unwrap()
    calls = sum(clock.calls.values())
    in_situ = (statistics.median(timed) - statistics.median(untimed)) * n / calls  # ns per timed call, in situ
    scale = max(1.0, in_situ / (clock.own_ns + clock.parent_ns))
    clock.own_ns, clock.parent_ns = clock.own_ns * scale, clock.parent_ns * scale
    return {label: clock.corrected_us(label, n) for label in dict.fromkeys(clock.ns)}


def worker_build_cpu(case: Case, monitor_arm: Callable[[Any], Any], n: int) -> tuple[float, int]:
    """µs of the Monitor's worker thread per Record it builds (sample_rate=1), and how many it built."""
    import groundtrace.monitor_workers as monitor_module
    from groundtrace.monitor import Monitor

    realize = getattr(monitor_module, "realize", None)
    if realize is None:
        return float("nan"), 0
    spent: list[int] = []

    def timed(record: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return realize(record)
        finally:
            if type(record).__name__ != "Record":
                spent.append(time.thread_time_ns() - started)

    monitor = Monitor(metrics=["lexical"], sample_rate=1.0, isolation="thread", flush_at_exit=False, queue_size=n + 10)
    monitor_module.realize = timed
    try:
        arm = monitor_arm(monitor)
        for i in range(n):
            case.request(arm, i)
        monitor.flush(120)
    finally:
        monitor_module.realize = realize
        monitor.close()
    return (statistics.median(spent) / 1000.0 if spent else float("nan")), len(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="chain,agent,li-query,li-agent")
    parser.add_argument("--n", type=int, default=2000, help="requests per arm (agents: a quarter)")
    parser.add_argument("--parts-n", type=int, default=1000, help="requests timed per part table (agents: a quarter)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--sample-rate", type=float, default=0.0)
    parser.add_argument("--baseline", metavar="GIT_REF", default=None)
    args = parser.parse_args()

    from groundtrace.monitor import Monitor

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    for name in args.cases.split(","):
        case = make_case(name)
        scale = 4 if "agent" in name else 1
        monitor = Monitor(metrics=["lexical"], sample_rate=args.sample_rate, flush_at_exit=False,
                          queue_size=10 * args.n + 1000)
        arms = case.arms(monitor, args.baseline)
        gc.collect()
        added = added_cpu(case, arms, args.n // scale, args.warmup)
        monitor.flush(120)
        print(f"\n{name}: CPU per request without a handler {added['none']:.3f} ms (median of {args.n // scale}); added:")
        for arm in arms:
            if arm != "none":
                print(f"  {arm:<12} {added[arm] * 1000:+7.1f} µs")
        tables = {}
        if args.baseline is not None:
            tables["baseline"] = parts_table(case, arms["baseline"], case.timed_parts(*case.baseline_modules),
                                             args.parts_n // scale)
        modules: Any = ([importlib.import_module("groundtrace_langchain.handler")] if isinstance(case, LangChainCase) else
                        [importlib.import_module(f"groundtrace_llamaindex.{m}") for m in ("handlers", "tracker", "run")])
        tables["groundtrace"] = parts_table(case, arms["groundtrace"], case.timed_parts(*modules), args.parts_n // scale)
        labels = list(dict.fromkeys(label for table in tables.values() for label in table))
        print(f"  where it goes, µs per request ({args.parts_n // scale} requests; timer's cost subtracted):")
        print("    " + f"{'part':<44}" + "".join(f"{arm:>12}" for arm in tables))
        for label in labels:
            print("    " + f"{label:<44}" + "".join(f"{tables[arm].get(label, 0.0):12.1f}" for arm in tables))
        print("    " + f"{'sum':<44}" + "".join(f"{sum(table.values()):12.1f}" for table in tables.values()))
        monitor.close()
        if isinstance(case, LangChainCase):
            from groundtrace_langchain import GroundtraceCallbackHandler

            def langchain_arm(monitor: Any) -> Any:
                return [GroundtraceCallbackHandler(monitor=monitor)]

            build, built = worker_build_cpu(case, langchain_arm, args.parts_n // scale)
        else:
            from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler
            from groundtrace_llamaindex.tracker import RootTracker

            def llamaindex_arm(monitor: Any) -> Any:
                tracker = RootTracker(monitor)
                return GroundtraceSpanHandler(tracker), GroundtraceEventHandler(tracker=tracker)

            build, built = worker_build_cpu(case, llamaindex_arm, args.parts_n // scale)
        print(f"  the Monitor's worker, per Record it keeps: building it {build:.1f} µs (median of {built})")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
