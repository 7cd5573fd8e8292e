"""Guard mode for code with no framework: an answer checked against its contexts before the caller gets it, by the
same metrics staging watches, under a policy and within a time budget.

    guard = groundtrace.guard(policy="redact", budget_ms=500)
    decision = guard.check(question, contexts, answer)      # .text is what to show
    for piece in guard.stream(question, contexts, chunks):  # sentence by sentence, each checked before it is sent
        ...

Policies, when the verdict says unsupported: ``flag`` delivers the answer with the decision; ``redact`` drops the
sentences that hold an unsupported span and delivers the rest; ``replace`` delivers the fallback text (per
language); ``reask`` calls ``reask(question, contexts, answer, phrases)`` once for a new answer, checks it, and
delivers it if it is supported, else the fallback; ``raise`` raises GuardBlocked. A check that is not done within
``budget_ms``, or that fails, is delivered as ``on_timeout`` says (``pass``: the answer, marked unchecked;
``fallback``: the fallback text), counted, and finished in the background, its Scores handed to ``on_score``.
``monitor``: a Monitor the Scores go to (its metrics are then the guard's, so staging gets this very Score).
``threads``: what a metric that takes them (grounding) reads on; default the process's cores, up to 4.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import threading
import time
from collections import Counter
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from groundtrace.capture.carried import read_item
from groundtrace.guards.decision import Decision, GuardBlocked
from groundtrace.guards.telemetry import DecisionTelemetry
from groundtrace.metrics import Metric, get_metric, metric_class
from groundtrace.privacy import Mask
from groundtrace.record import Record
from groundtrace.redaction import get_logger
from groundtrace.score import Score, Span
from groundtrace.text.lang import guess_language
from groundtrace.text.sentences import split_sentences
from groundtrace.trace_context import otel_ids

if TYPE_CHECKING:
    from groundtrace.guards.streams import AsyncGuardedStream, GuardedStream, SentenceGate
    from groundtrace.monitor import Monitor

log = get_logger("groundtrace.guard")

POLICIES = ("flag", "redact", "replace", "reask", "raise")
ON_TIMEOUT = ("pass", "fallback")
NOT_IN_BUDGET = "not checked within the budget"
T = TypeVar("T")
FALLBACK = {
    "en": "I can't answer that reliably from the documents I have.",
    "ru": "Не могу надёжно ответить на этот вопрос по имеющимся документам.",
    "zh": "根据现有的文档，我无法可靠地回答这个问题。",
}
#: (question, contexts, answer, the unsupported phrases) -> a new answer
Reask = Callable[[str | None, list[str], str, list[str]], str]
OnScore = Callable[[Record, list[Score]], None]


class Guard:
    """Checks answers before the caller gets them (see the module's docstring; built by :func:`guard`)."""

    def __init__(self, metrics: Sequence[str | Metric] | None = None, *, policy: str = "flag",
                 fallback: str | Mapping[str, str] | None = None, budget_ms: float | None = None,
                 on_timeout: str = "pass", reask: Reask | None = None, on_score: OnScore | None = None,
                 monitor: Monitor | None = None, threads: int | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"guard: policy must be one of {POLICIES}, got {policy!r}")
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"guard: on_timeout must be one of {ON_TIMEOUT}, got {on_timeout!r}")
        if policy == "reask" and reask is None:
            raise ValueError("guard: the reask policy needs reask=, the function that asks the model once more")
        if budget_ms is not None and budget_ms <= 0:
            raise ValueError(f"guard: budget_ms must be above 0, got {budget_ms}")
        if monitor is not None and metrics is not None and _names(metrics) != [m.name for m in monitor.metrics]:
            raise ValueError("guard: a guard that hands its Scores to a Monitor scores with that Monitor's metrics "
                             f"({[m.name for m in monitor.metrics]}): leave metrics= out")
        # with a Monitor, its very metrics (their options, their warm models): the Score staging gets is this one
        self.metrics = list(monitor.metrics) if monitor is not None else \
            [_built(m, threads) for m in (metrics or _default_metrics())]
        self.policy, self.on_timeout, self.budget_ms, self.monitor = policy, on_timeout, budget_ms, monitor
        self.fallback = dict(FALLBACK) | ({lang: fallback for lang in FALLBACK} if isinstance(fallback, str)
                                          else dict(fallback or {}))
        self._reask, self._on_score = reask, on_score
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._telemetry = DecisionTelemetry(monitor)

    # --------------------------------------------------------------------------------------- answers
    def check(self, question: str | None, contexts: Sequence[str], answer: str, *,
              language: str | None = None) -> Decision:
        """The decision on one answer (raises GuardBlocked under the ``raise`` policy, nothing else)."""
        return self.check_record(guarded_record(question, contexts, answer, language))

    def check_record(self, record: Record, *, monitor: Monitor | None = None, mask: Mask | None = None) -> Decision:
        """check() for a Record an integration captured (its ids link the Score to the request's trace); its Scores
        go to ``monitor`` (an application's handler's, with its ``mask``) instead of the guard's own."""
        started = time.perf_counter()
        to = _To(monitor or self.monitor, mask)
        scores, pending = self._scores(record, self.budget_ms)
        try:
            decision = self._decide(record, scores, started, to=to)
        except GuardBlocked as blocked:
            self._deliver(record, blocked.decision, scores, pending, to)
            self._done(blocked.decision)
            raise
        if decision.reasked_from is None:  # a reask delivers both answers itself
            self._deliver(record, decision, scores, pending, to)
        return self._done(decision)

    async def acheck(self, question: str | None, contexts: Sequence[str], answer: str, *,
                     language: str | None = None) -> Decision:
        """check() off the event loop."""
        return await off_loop(lambda: self.check(question, contexts, answer, language=language))

    async def acheck_record(self, record: Record, *, monitor: Monitor | None = None,
                            mask: Mask | None = None) -> Decision:
        """check_record() off the event loop."""
        return await off_loop(lambda: self.check_record(record, monitor=monitor, mask=mask))

    def stream(self, question: str | None, contexts: Sequence[str], chunks: Iterable[str], *,
               language: str | None = None) -> GuardedStream:
        """The answer's chunks as the caller may see them: under ``flag`` untouched (the decision at the end);
        otherwise sentence by sentence, each checked before it is sent, at most one sentence held back."""

        return self.stream_record(guarded_record(question, contexts, "", language), chunks)

    def astream(self, question: str | None, contexts: Sequence[str], chunks: AsyncIterable[str], *,
                language: str | None = None) -> AsyncGuardedStream:
        """stream() for an async iterator of chunks."""

        return self.astream_record(guarded_record(question, contexts, "", language), chunks)

    def stream_record(self, record: Record | Callable[[], Record], chunks: Iterable[str]) -> GuardedStream:
        """stream() for an integration: ``record`` may be a function that gives the passages known so far (read at
        each sentence: an agent may retrieve while it answers)."""
        from groundtrace.guards.streams import GuardedStream

        return GuardedStream(self, record, chunks)

    def astream_record(self, record: Record | Callable[[], Record], chunks: AsyncIterable[str]) -> AsyncGuardedStream:
        """astream() for an integration (see stream_record)."""
        from groundtrace.guards.streams import AsyncGuardedStream

        return AsyncGuardedStream(self, record, chunks)

    def gate(self, record: Record | Callable[[], Record], *, deliver: bool = True) -> SentenceGate:
        """The sentence gate of one streamed answer, for a stream that carries other events too (see SentenceGate);
        ``deliver=False``: the caller hands the whole answer to staging itself (deliver_streamed)."""
        from groundtrace.guards.streams import SentenceGate

        return SentenceGate(self, record, deliver)

    def wrap(self, target: Any, **options: Any) -> Any:
        """``target`` guarded, in its framework's shape: a LangChain Runnable or LangGraph graph
        (groundtrace-langchain), a LlamaIndex query or chat engine (groundtrace-llamaindex); ``options`` are the
        integration's (``answer_key=`` for a graph's state, say)."""
        from groundtrace.guards.adapters import wrapper_for

        return wrapper_for(target)(self, target, **options)

    def __call__(self, value: Mapping[str, Any]) -> str:
        """The text to deliver for ``{"question", "contexts" (or "context"), "answer"}``: what ``chain | guard``
        runs (LangChain makes the guard a step that gets the previous step's output)."""
        if not isinstance(value, Mapping) or "answer" not in value:
            raise TypeError("guard: as a step, the guard takes a dict with the answer and its contexts "
                            "({'question': ..., 'contexts': [...], 'answer': ...})")
        contexts = value.get("contexts", value.get("context"))
        return self.check(value.get("question"), passages(contexts), str(value["answer"])).text

    @property
    def stats(self) -> dict[str, int]:
        """Answers checked, and how many were passed, flagged, redacted, replaced, reasked, raised, unchecked."""
        with self._lock:
            return dict(self._counts)

    # ------------------------------------------------------------------------------------ the check
    def _scores(self, record: Record, budget_ms: float | None) -> tuple[list[Score] | None, Future]:
        """The Scores of ``record``, or None when they are not there within the budget, and the check (it goes on)."""
        future = _pool().submit(self._score_all, record)
        try:
            return future.result(None if budget_ms is None else budget_ms / 1000.0), future
        except FutureTimeout:
            self._count("timed_out")
            return None, future

    def _score_all(self, record: Record) -> list[Score]:
        return [metric.score(record) for metric in self.metrics]

    def _deliver(self, record: Record, decision: Decision, scores: list[Score] | None, pending: Future,
                 to: _To) -> None:
        """The answer's Scores to the Monitor and ``on_score``, the decision in its metadata; a check over its
        budget delivers when it ends."""
        marked = record.model_copy(update={"metadata": {**record.metadata, "guard": decision.summary()}})
        if scores is not None:
            self._hand_over(marked, scores, to)
        else:
            pending.add_done_callback(lambda done: self._hand_over(marked, done.result(), to)
                                      if done.exception() is None else None)

    def deliver_streamed(self, record: Record, decision: Decision, *, monitor: Monitor | None = None,
                         mask: Mask | None = None) -> None:
        """A streamed answer, checked sentence by sentence on the request's path: scored whole, off it, for staging
        (``monitor``: an application's handler's, instead of the guard's own)."""
        to = _To(monitor or self.monitor, mask)
        if to.monitor is None and self._on_score is None:
            return
        marked = record.model_copy(update={"metadata": {**record.metadata, "guard": decision.summary()}})
        _pool().submit(self._score_all, marked).add_done_callback(
            lambda done: self._hand_over(marked, done.result(), to) if done.exception() is None else None)

    def _hand_over(self, record: Record, scores: list[Score], to: _To) -> None:
        if to.monitor is not None:
            to.monitor.submit_scored(record, scores, mask=to.mask)  # never raises
        if self._on_score is None:
            return
        try:
            self._on_score(record, scores)
        except Exception as error:  # the caller's sink is theirs: said, never raised into the answer's path
            log.warning("groundtrace guard: on_score failed (%s)", type(error).__name__)

    def _decide(self, record: Record, scores: list[Score] | None, started: float, reasked: bool = False,
                policy: str | None = None, to: _To | None = None) -> Decision:
        policy = policy or self.policy
        answer = record.answer or ""
        if scores is None or any(s.error for s in scores):
            why = NOT_IN_BUDGET if scores is None else "the check failed: " + "; ".join(
                f"{s.metric}: {s.error}" for s in scores if s.error)
            if self.on_timeout == "fallback":
                return Decision("replaced", None, self._fallback(record), scores or [], [], _since(started), why,
                                answer)
            return Decision("unchecked", None, answer, scores or [], [], _since(started), why, answer)
        flagged = [s for s in scores if s.hallucinated]
        spans = [span for s in flagged for span in s.spans]
        if not flagged:
            return Decision("reasked" if reasked else "passed", False, answer, scores, [], _since(started),
                            "; ".join(f"{s.metric}: {s.reason}" for s in scores), answer)
        reason = "; ".join(f"{s.metric}: {s.reason}" for s in flagged)
        decision = Decision("flagged", True, answer, scores, spans, _since(started), reason, answer)
        if policy == "flag":
            return decision
        if policy == "redact":
            kept = redacted(answer, spans)
            if kept.strip():
                return _with(decision, action="redacted", text=kept)
        if policy == "reask" and not reasked:
            return self._reasked(record, decision, started, to or _To(self.monitor, None))
        if policy == "raise":
            raise GuardBlocked(_with(decision, action="raised", seconds=_since(started)))
        return _with(decision, action="replaced", text=self._fallback(record))

    def _reasked(self, record: Record, first: Decision, started: float, to: _To) -> Decision:
        """The model asked once more; both its answers reach staging (each is one the model wrote), the first
        marked as asked again."""
        phrases = [s.text for s in first.spans]
        assert self._reask is not None  # the constructor refuses the reask policy without it
        try:
            answer = self._reask(record.question, list(record.contexts or []), record.answer or "", phrases)
        except Exception as error:
            log.warning("groundtrace guard: reask failed (%s): the fallback is delivered", type(error).__name__)
            return _with(first, action="replaced", text=self._fallback(record), seconds=_since(started))
        again = record.model_copy(update={"answer": answer, "id": None if record.id is None else f"{record.id}.reask"})
        left = None if self.budget_ms is None else max(1.0, self.budget_ms - 1000 * (time.perf_counter() - started))
        scores, pending = self._scores(again, left)
        decision = self._decide(again, scores, started, reasked=True)
        decision = _with(decision, reasked_from=record.answer or "")
        if decision.hallucinated is not False:
            decision = _with(decision, action="replaced", text=self._fallback(record),
                             reason=f"asked again, still unsupported: {decision.reason}")
        self._deliver(record, _with(first, action="reasked"), first.scores, pending, to)
        self._deliver(again, decision, scores, pending, to)
        return decision

    def _fallback(self, record: Record) -> str:
        language = record.language or guess_language(record.answer or "")
        return self.fallback.get(language) or self.fallback["en"]

    def _done(self, decision: Decision) -> Decision:
        self._count("checked", decision.action)
        self._telemetry.record(decision, NOT_IN_BUDGET in decision.reason)
        return decision

    def _count(self, *names: str) -> None:
        with self._lock:
            self._counts.update(names)


def redacted(answer: str, spans: Sequence[Span]) -> str:
    """``answer`` without its sentences that hold any of ``spans``, each taken out with the blanks after it."""
    sentences = split_sentences(answer)
    if not sentences:
        return answer
    kept = [answer[: sentences[0].start]]
    for i, sentence in enumerate(sentences):
        end = sentences[i + 1].start if i + 1 < len(sentences) else len(answer)
        if not any(s.start < sentence.end and s.end > sentence.start for s in spans):
            kept.append(answer[sentence.start:end])
    return "".join(kept).rstrip()


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the default executor, in the caller's context (its current span, its capture), so
    that the event loop goes on while a check runs."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(None, lambda: context.run(function, *args))


def guarded_record(question: str | None, contexts: Sequence[str], answer: str, language: str | None) -> Record:
    """The Record a guard checks, linked to the current OpenTelemetry span when there is one."""
    if isinstance(contexts, str) or not all(isinstance(c, str) for c in contexts):
        raise TypeError("guard: contexts must be a list of strings (the passages the answer was written from)")
    ids = otel_ids()
    return Record(question=question, contexts=list(contexts), answer=answer, language=language,
                  trace_id=ids[0] if ids else None, span_id=ids[1] if ids else None)


def passages(value: Any) -> list[str]:
    """A step's contexts as texts: strings, LangChain Documents, LlamaIndex nodes (capture's own reading)."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    found = [read_item(item) for item in items]
    return [item.text for item in found if item is not None]


class _To(NamedTuple):
    """Where a check's Scores go besides ``on_score``: a Monitor, and the mask it applies for its caller."""

    monitor: Monitor | None
    mask: Mask | None


def _built(metric: str | Metric, threads: int | None) -> Metric:
    """A metric by name, reading on ``threads`` threads where it takes them (grounding's cross-encoder): on the
    request's path a check may use the cores the process has (default; the values do not change with it)."""
    if not isinstance(metric, str):
        return metric
    if "threads" not in inspect.signature(metric_class(metric).__init__).parameters:
        return get_metric(metric)
    return get_metric(metric, threads=threads or max(1, min(4, len(os.sched_getaffinity(0))
                                                            if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)))


def _names(metrics: Sequence[str | Metric]) -> list[str]:
    return [m if isinstance(m, str) else m.name for m in metrics]


def _with(decision: Decision, **changes: Any) -> Decision:
    from dataclasses import replace

    return replace(decision, **changes)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _default_metrics() -> list[str]:
    """The verdict file staging scores with (GROUNDTRACE_VERDICT_FILE), else ``grounding``."""
    from groundtrace.config import verdict_file

    return ["combined"] if verdict_file() else ["grounding"]


_POOL: ThreadPoolExecutor | None = None
_POOL_PID = 0
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The process's checks run here (a forked child makes its own: threads do not survive a fork)."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL, _POOL_PID = ThreadPoolExecutor(max_workers=4, thread_name_prefix="groundtrace-guard"), os.getpid()
        return _POOL


def guard(metrics: Sequence[str | Metric] | None = None, **options: Any) -> Guard:
    """A Guard (see the module's docstring): ``policy``, ``fallback``, ``budget_ms``, ``on_timeout``, ``reask``,
    ``on_score``, ``monitor``, ``threads``."""
    return Guard(metrics, **options)
