"""CPU that groundtrace's callbacks take from the application's own thread, per request, and where
it goes: the LangChain handler on a RAG chain and on an agent, the LlamaIndex handlers on a query
engine and on a FunctionAgent.

    python benchmarks/callback_cpu.py [--cases chain,agent,li-query,li-agent] [--n 2000]
        [--sample-rate 0] [--baseline GIT_REF] [--parts-n 1000] [--telemetry]

1. Added CPU per request: every request runs with no handler, with a handler that does nothing
   (what the framework charges for any handler: its floor), with groundtrace's and, with
   ``--baseline``, with groundtrace's integration package as it was at GIT_REF (copied out of git
   under another name, beside today's core), in a fresh random order per round, in one process:
   medians of ``time.thread_time`` per request, minus the median without a handler. The Monitor
   samples every record out by default (``--sample-rate 0``), so only the callback path is timed;
   a record it keeps is built by its worker thread, off the application's thread, whose CPU is
   reported apart (3.).
2. Where it goes: a sampling profile of real requests (the stack read every 200 µs) says
   which share of the CPU is spent in which part of groundtrace; times the CPU per request, that is
   µs per request. (A clock around each callback adds its own cost to every call: among the
   framework's work, with cold caches, about as much as the callbacks themselves.)
3. The Monitor's worker: the CPU of building one kept Record (the contexts chosen, the Record
   validated), with ``sample_rate=1``.
4. With ``--telemetry`` (LangChain cases): the Monitor's own metrics (groundtrace.telemetry) on an SDK
   MeterProvider. Every record scored (lexical, in its scoring process, and in a thread), metrics
   off and on: the application thread's CPU per request (the metrics are recorded on the worker's
   thread, so the two should not differ), and the worker thread's CPU per scored record spent
   recording them (decoding the scoring process's summary, the histogram, the counts).

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
import signal
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


# ---------------------------------------------------------------------------------- the profiler
class StackSampler:
    """A sampling profiler: every ``interval_s`` (ITIMER_REAL: the CPU-time timers tick only at the
    kernel's clock tick, a few ms), the main thread's stack is read and the sample filed under the part of groundtrace it is in (by the
    functions of groundtrace's files on the stack, innermost named part first), or "outside".
    Timing each callback with a clock instead adds the clock's own cost to every call, which among
    the framework's work (cold caches) is as large as the callbacks themselves."""

    def __init__(self, label_of: Callable[[list[tuple[str, str]]], str], interval_s: float = 200e-6) -> None:
        self.label_of, self.interval_s = label_of, interval_s
        self.samples: dict[str, int] = defaultdict(int)
        self._busy = False

    def _sample(self, signum: int, frame: Any) -> None:
        if self._busy:  # the timer fired again inside this handler: that sample would be our own
            return
        self._busy = True
        try:
            self._file(frame)
        finally:
            self._busy = False

    def _file(self, frame: Any) -> None:
        ours = []
        while frame is not None:
            code = frame.f_code
            if "groundtrace" in code.co_filename and not code.co_filename.endswith("callback_cpu.py"):
                ours.append((Path(code.co_filename).stem, code.co_name))
            frame = frame.f_back
        self.samples[self.label_of(ours) if ours else "outside"] += 1

    def __enter__(self) -> StackSampler:
        signal.signal(signal.SIGALRM, self._sample)
        signal.setitimer(signal.ITIMER_REAL, self.interval_s, self.interval_s)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def first_part(stack: list[tuple[str, str]], parts: list[tuple[str, str, str]], otherwise: str) -> str:
    """The label of the innermost (module, function) of ``parts`` on the stack (innermost first)."""
    for module, function in stack:
        for part_module, part_function, label in parts:
            if function == part_function and module == part_module:
                return label
    return otherwise


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
                text = moved_core_imports(source.read().decode("utf-8").replace(package, name))
                (target / Path(member.name).name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(target.parent))
    return name


# the core modules that moved into groundtrace.capture (issue 36): an integration of before then imports them there
MOVED = ((r"groundtrace\.capture(?![.\w])", "groundtrace.capture.kit"), (r"groundtrace\.turn_stats\b", "groundtrace.capture.stats"),
         (r"groundtrace\.turn(?!\w)", "groundtrace.capture.turn"), (r"groundtrace\.session(?!\w)", "groundtrace.capture.session"),
         (r"groundtrace\.earlier_turns\b", "groundtrace.capture.earlier_turns"))


def moved_core_imports(text: str) -> str:
    """An older integration's source with its imports of moved core modules pointed at where they are now."""
    import re

    for old, new in MOVED:
        text = re.sub(rf"(?<=from ){old}(?= import)|(?<=import ){old}", new, text)
    return text


# ------------------------------------------------------------------------------------- the cases
class Case:
    """One application and the ways to run one request of it with a given arm attached."""

    name: str

    def arms(self, monitor: Any, baseline: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def request(self, arm: Any, i: int) -> None:
        raise NotImplementedError

    @staticmethod
    def label_of(stack: list[tuple[str, str]]) -> str:
        """The part of groundtrace a stack (its groundtrace frames, innermost first) is in."""
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
        arms["groundtrace"] = [GroundtraceCallbackHandler(monitor=monitor)]
        return arms

    def request(self, arm: Any, i: int) -> None:
        self.app.invoke(self.input, config={"callbacks": arm})

    @staticmethod
    def label_of(stack: list[tuple[str, str]]) -> str:
        return first_part(stack, [
            ("monitor", "submit", "Monitor.submit"),
            ("records", "read_end", "reading the end / building the Record"),
            ("records", "build_record", "reading the end / building the Record"),
            ("handler", "_submit", "the root's end: the rest"),
            ("handler", "_start_root", "the root's start"),
            ("handler", "on_chain_start", "chain starts below the root"),
            ("handler", "on_chain_end", "chain ends below the root"),
        ], "retriever, model and tool events")


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

    @staticmethod
    def label_of(stack: list[tuple[str, str]]) -> str:
        return first_part(stack, [
            ("monitor", "submit", "Monitor.submit"),
            ("run", "read_end", "reading the end / building the Record"),
            ("run", "to_record", "reading the end / building the Record"),
            ("tracker", "_submit", "the root's end: the rest"),
            ("tracker", "_conclude", "the root's end: the rest"),
            ("run", "start", "the root's start"),
            ("tracker", "_start_root", "the root's start"),
            ("tracker", "on_event", "events"),
            ("handlers", "handle", "events"),
            ("tracker", "span_started", "span starts"),
            ("handlers", "span_enter", "span starts"),
            ("handlers", "new_span", "span starts"),
            ("tracker", "span_exited", "span ends"),
            ("handlers", "span_exit", "span ends"),
            ("handlers", "prepare_to_exit_span", "span ends"),
        ], "other")


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


def parts_table(case: Case, arm: Any, n: int) -> dict[str, float]:
    """µs of CPU per request in each part of groundtrace, and "outside" it (the framework, the
    application): each part's share of the profiler's samples times the CPU per request, measured
    on the same requests without the profiler (whose signal handler takes CPU of its own)."""
    cpu = []
    for i in range(n):
        started = time.thread_time()
        case.request(arm, i)
        cpu.append(time.thread_time() - started)
    per_request_us = statistics.median(cpu) * 1e6
    sampler = StackSampler(case.label_of)
    with sampler:
        for i in range(n):
            case.request(arm, i)
    total = sum(sampler.samples.values()) or 1
    return {label: count / total * per_request_us for label, count in sampler.samples.items()}


def worker_build_cpu(case: Case, monitor_arm: Callable[[Any], Any], n: int) -> tuple[float, int]:
    """µs of the Monitor's worker thread per Record it builds (sample_rate=1), and how many it built."""
    import groundtrace.monitor.workers as monitor_module
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

    monitor = Monitor(metrics=["lexical"], sinks="none", sample_rate=1.0, isolation="thread", flush_at_exit=False, queue_size=n + 10)
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


def metrics_cpu(case: Case, monitor_arm: Callable[[Any], Any], n: int, warmup: int) -> None:
    """4.: every record scored, metrics off and on, per isolation: the application thread's CPU per
    request, and the worker thread's CPU per record recording the metrics."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    provider = MeterProvider([InMemoryMetricReader()])  # an exporter's reader; collection is not per record
    for isolation in ("process", "thread"):
        metrics_cpu_in(case, monitor_arm, provider, isolation, n, warmup)


def metrics_cpu_in(case: Case, monitor_arm: Callable[[Any], Any], provider: Any, isolation: str, n: int,
                   warmup: int) -> None:
    from groundtrace.monitor import Monitor

    off, on = (Monitor(metrics=["lexical"], sinks="none", isolation=isolation, telemetry=telemetry,
                       flush_at_exit=False, queue_size=2 * (n + warmup) + 10) for telemetry in ("none", provider))
    spent: list[int] = []
    record_metrics = on._record_metrics

    def timed(item: Any, outcome: Any) -> None:
        started = time.thread_time_ns()
        record_metrics(item, outcome)
        spent.append(time.thread_time_ns() - started)

    on._record_metrics = timed  # type: ignore[method-assign]
    for monitor in (off, on):  # the scoring process started, every import done
        case.request(monitor_arm(monitor), 0)
        monitor.flush(120)
    spent.clear()
    arms = {"none": [], "scored": monitor_arm(off), "scored + metrics": monitor_arm(on)}
    added = added_cpu(case, arms, n, warmup)
    for monitor in (off, on):
        monitor.flush(300)
    print(f"  every record scored (lexical, isolation {isolation}), the application thread's CPU added per request:")
    for arm in ("scored", "scored + metrics"):
        print(f"    {arm:<18} {added[arm] * 1000:+7.1f} µs")
    print(f"  the worker thread recording the metrics: {statistics.median(spent) / 1000:.1f} µs per scored "
          f"record (median of {len(spent)}; mean {statistics.fmean(spent) / 1000:.1f})")
    off.close()
    on.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="chain,agent,li-query,li-agent")
    parser.add_argument("--n", type=int, default=2000, help="requests per arm (agents: a quarter)")
    parser.add_argument("--parts-n", type=int, default=1000, help="requests timed per part table (agents: a quarter)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--sample-rate", type=float, default=0.0)
    parser.add_argument("--baseline", metavar="GIT_REF", default=None)
    parser.add_argument("--telemetry", action="store_true", help="4.: the cost of the Monitor's metrics")
    args = parser.parse_args()

    from groundtrace.monitor import Monitor

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    for name in args.cases.split(","):
        case = make_case(name)
        scale = 4 if "agent" in name else 1
        monitor = Monitor(metrics=["lexical"], sinks="none", sample_rate=args.sample_rate, flush_at_exit=False,
                          queue_size=10 * args.n + 1000)
        arms = case.arms(monitor, args.baseline)
        gc.collect()
        added = added_cpu(case, arms, args.n // scale, args.warmup)
        monitor.flush(120)
        print(f"\n{name}: CPU per request without a handler {added['none']:.3f} ms (median of {args.n // scale}); added:")
        for arm in arms:
            if arm != "none":
                print(f"  {arm:<12} {added[arm] * 1000:+7.1f} µs")
        tables = {arm: parts_table(case, arms[arm], args.parts_n // scale) for arm in ("baseline", "groundtrace")
                  if arm in arms}
        labels = sorted({label for table in tables.values() for label in table} - {"outside"},
                        key=lambda label: -max(table.get(label, 0.0) for table in tables.values()))
        print(f"  where it goes, µs per request (a sampling profile of {args.parts_n // scale} requests per arm):")
        print("    " + f"{'part':<44}" + "".join(f"{arm:>12}" for arm in tables))
        for label in labels:
            print("    " + f"{label:<44}" + "".join(f"{tables[arm].get(label, 0.0):12.1f}" for arm in tables))
        print("    " + f"{'groundtrace, all parts':<44}" + "".join(
            f"{sum(v for k, v in table.items() if k != 'outside'):12.1f}" for table in tables.values()))
        print("    " + f"{'outside groundtrace (framework, application)':<44}" + "".join(
            f"{table.get('outside', 0.0):12.1f}" for table in tables.values()))
        monitor.close()
        if isinstance(case, LangChainCase):
            from groundtrace_langchain import GroundtraceCallbackHandler

            def langchain_arm(monitor: Any) -> Any:
                return [GroundtraceCallbackHandler(monitor=monitor)]

            build, built = worker_build_cpu(case, langchain_arm, args.parts_n // scale)
            if args.telemetry:
                print(f"  the Monitor's metrics ({args.parts_n // scale} requests per arm):")
                metrics_cpu(case, langchain_arm, args.parts_n // scale, args.warmup)
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
