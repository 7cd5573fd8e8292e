"""The application's speed and memory under two faults, with and without groundtrace: 5 MB retrieved
contexts, and 200 scrapes of the metrics endpoint at once.

    python benchmarks/faults.py [--huge] [--scrapes] [--calls 40] [--threads 1,4]

1. ``--huge``: a LangChain LCEL chain (a retriever whose document is 5 MB, a prompt, a chat model that
   answers at once) called ``--calls`` times by each of ``--threads`` threads, every record scored by
   ``lexical`` in its scoring process (the default Monitor). Each variant runs in a process of its own, so
   its peak RSS (``ru_maxrss``) is its own: no groundtrace, then groundtrace. Printed: the calls' p50 and
   p99 (wall clock, ms) and the process's peak RSS (MB), and the Monitor's counts.
2. ``--scrapes``: one thread calls the same chain with a 10 ms model (a small context) for 5 s; meanwhile
   200 threads scrape the Prometheus endpoint (``telemetry="prometheus:127.0.0.1:0"``) as fast as they can.
   Printed: the calls' p50 and p99 with no scraping and under the scrapes, the scrapes answered 200 and 503,
   and how many expositions were made.

Compare variants within one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HUGE_CHARS = 5_000_000


def chain(context: str, wait_s: float = 0.0) -> Any:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    class One(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return [Document(id="doc", page_content=context)]

    def wait(value: Any) -> Any:
        time.sleep(wait_s)
        return value

    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
    model = FakeListChatModel(responses=["Paris is the capital of France."])
    return ({"context": One() | (lambda docs: docs[0].page_content), "question": RunnablePassthrough()}
            | prompt | RunnableLambda(wait) | model | StrOutputParser())


def percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def run_huge(with_groundtrace: bool, threads: int, calls: int) -> dict[str, Any]:
    """One variant, in this process: the calls' times, the peak RSS, the Monitor's counts."""
    app = chain("Paris is the capital of France. " * (HUGE_CHARS // 32))
    config: dict[str, Any] = {}
    monitor = None
    if with_groundtrace:
        from groundtrace.monitor import Monitor
        from groundtrace_langchain import GroundtraceCallbackHandler

        monitor = Monitor(["lexical"], "none", flush_at_exit=False)
        config = {"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]}
    app.invoke("warm up", config=config)
    times: list[float] = []
    lock = threading.Lock()

    def caller() -> None:
        for _ in range(calls):
            started = time.perf_counter()
            app.invoke("What is the capital of France?", config=config)
            with lock:
                times.append(time.perf_counter() - started)

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    counts = {}
    if monitor is not None:
        monitor.flush(120)
        counts = {k: v for k, v in monitor.stats.as_dict().items() if k in ("submitted", "scored", "failed", "dropped")}
        monitor.close()
    p50, p99 = percentiles(times)
    return {"p50_ms": p50, "p99_ms": p99, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "counts": counts}


def huge(threads: list[int], calls: int) -> None:
    print(f"5 MB contexts: {calls} calls per thread, every record scored by lexical in its scoring process")
    print(f"{'threads':>7} {'variant':<12} {'p50 ms':>8} {'p99 ms':>8} {'peak RSS MB':>12}  monitor")
    for count in threads:
        for variant in ("none", "groundtrace"):
            done = subprocess.run([sys.executable, __file__, "--one-huge", variant, str(count), str(calls)],
                                  capture_output=True, text=True, cwd=ROOT, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{count:>7} {variant:<12} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['peak_rss_mb']:>12.0f}  "
                  f"{row['counts'] or ''}")


def scrapes(duration_s: float = 5.0, scrapers: int = 200) -> None:
    from groundtrace.monitor import Monitor
    from groundtrace_langchain import GroundtraceCallbackHandler

    monitor = Monitor(["lexical"], "none", telemetry="prometheus:127.0.0.1:0", flush_at_exit=False)
    url = monitor.telemetry.endpoint.url
    config = {"callbacks": [GroundtraceCallbackHandler(monitor=monitor)]}
    app = chain("Paris is the capital of France.", wait_s=0.01)
    app.invoke("warm up", config=config)

    def calls() -> list[float]:
        times, end = [], time.monotonic() + duration_s
        while time.monotonic() < end:
            started = time.perf_counter()
            app.invoke("What is the capital of France?", config=config)
            times.append(time.perf_counter() - started)
        return times

    quiet = calls()
    stop = threading.Event()
    answered = {200: 0, 503: 0, "other": 0}
    lock = threading.Lock()

    def scrape() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    answer.read()
                    status: Any = answer.status
            except urllib.error.HTTPError as error:
                status = error.code
            except OSError:
                status = "other"
            with lock:
                answered[status if status in answered else "other"] += 1

    with ThreadPoolExecutor(scrapers) as pool:
        for _ in range(scrapers):
            pool.submit(scrape)
        time.sleep(0.5)
        loaded = calls()
        stop.set()
    monitor.close()
    print(f"one thread calling a chain with a 10 ms model, {duration_s:g} s each; {scrapers} scrapers at once")
    for name, times in (("no scrapes", quiet), (f"{scrapers} scrapers", loaded)):
        p50, p99 = percentiles(times)
        print(f"  {name:<14} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  ({len(times)} calls)")
    print(f"  scrapes answered: {answered[200]} with 200, {answered[503]} with 503 (busy), {answered['other']} other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--huge", action="store_true")
    parser.add_argument("--scrapes", action="store_true")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--threads", default="1,4")
    parser.add_argument("--one-huge", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_huge:
        variant, threads, calls = args.one_huge
        print(json.dumps(run_huge(variant == "groundtrace", int(threads), int(calls))))
        return
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    if args.huge or not args.scrapes:
        huge([int(t) for t in args.threads.split(",")], args.calls)
    if args.scrapes or not args.huge:
        scrapes()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
