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
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from groundtrace.guards.decision import Action, Decision, GuardBlocked
from groundtrace.metrics import Metric, get_metric
from groundtrace.record import Record
from groundtrace.redaction import get_logger
from groundtrace.score import Score, Span
from groundtrace.text.lang import guess_language
from groundtrace.text.sentences import split_sentences

log = get_logger("groundtrace.guard")

POLICIES = ("flag", "redact", "replace", "reask", "raise")
ON_TIMEOUT = ("pass", "fallback")
FALLBACK = {
    "en": "I can't answer that reliably from the documents I have.",
    "ru": "Не могу надёжно ответить на этот вопрос по имеющимся документам.",
    "zh": "根据现有的文档，我无法可靠地回答这个问题。",
}
#: (question, contexts, answer, the unsupported phrases) -> a new answer
Reask = Callable[[str | None, list[str], str, list[str]], str]
OnScore = Callable[[Record, list[Score]], None]


class Guard:
    def __init__(self, metrics: Sequence[str | Metric] | None = None, *, policy: str = "flag",
                 fallback: str | Mapping[str, str] | None = None, budget_ms: float | None = None,
                 on_timeout: str = "pass", reask: Reask | None = None, on_score: OnScore | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"guard: policy must be one of {POLICIES}, got {policy!r}")
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"guard: on_timeout must be one of {ON_TIMEOUT}, got {on_timeout!r}")
        if policy == "reask" and reask is None:
            raise ValueError("guard: the reask policy needs reask=, the function that asks the model once more")
        if budget_ms is not None and budget_ms <= 0:
            raise ValueError(f"guard: budget_ms must be above 0, got {budget_ms}")
        self.metrics = [get_metric(m) for m in (metrics or _default_metrics())]
        self.policy, self.on_timeout, self.budget_ms = policy, on_timeout, budget_ms
        self.fallback = dict(FALLBACK) | ({lang: fallback for lang in FALLBACK} if isinstance(fallback, str)
                                          else dict(fallback or {}))
        self._reask, self._on_score = reask, on_score
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    # --------------------------------------------------------------------------------------- answers
    def check(self, question: str | None, contexts: Sequence[str], answer: str, *,
              language: str | None = None) -> Decision:
        """The decision on one answer (raises GuardBlocked under the ``raise`` policy, nothing else)."""
        started = time.perf_counter()
        record = _record(question, contexts, answer, language)
        scores = self._scores(record, self.budget_ms)
        decision = self._decide(record, scores, started)
        return self._done(decision)

    async def acheck(self, question: str | None, contexts: Sequence[str], answer: str, *,
                     language: str | None = None) -> Decision:
        """check() off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.check(question, contexts, answer, language=language))

    def stream(self, question: str | None, contexts: Sequence[str], chunks: Iterable[str], *,
               language: str | None = None) -> GuardedStream:
        """The answer's chunks as the caller may see them: under ``flag`` untouched (the decision at the end);
        otherwise sentence by sentence, each checked before it is sent, at most one sentence held back."""
        return GuardedStream(self, question, contexts, chunks, language)

    def astream(self, question: str | None, contexts: Sequence[str], chunks: AsyncIterable[str], *,
                language: str | None = None) -> AsyncGuardedStream:
        """stream() for an async iterator of chunks."""
        return AsyncGuardedStream(self, question, contexts, chunks, language)

    @property
    def stats(self) -> dict[str, int]:
        """Answers checked, and how many were passed, flagged, redacted, replaced, reasked, raised, unchecked."""
        with self._lock:
            return dict(self._counts)

    # ------------------------------------------------------------------------------------ the check
    def _scores(self, record: Record, budget_ms: float | None) -> list[Score] | None:
        """The Scores of ``record``, or None when they are not there within the budget (then they are handed to
        ``on_score`` when they come)."""
        future = _pool().submit(self._score_all, record)
        try:
            scores = future.result(None if budget_ms is None else budget_ms / 1000.0)
        except FutureTimeout:
            self._count("timed_out")
            future.add_done_callback(lambda done: self._late(record, done))
            return None
        self._hand_over(record, scores)
        return scores

    def _score_all(self, record: Record) -> list[Score]:
        return [metric.score(record) for metric in self.metrics]

    def _late(self, record: Record, done: Future) -> None:
        if done.exception() is None:
            self._hand_over(record, done.result())

    def _hand_over(self, record: Record, scores: list[Score]) -> None:
        if self._on_score is None:
            return
        try:
            self._on_score(record, scores)
        except Exception as error:  # the caller's sink is theirs: said, never raised into the answer's path
            log.warning("groundtrace guard: on_score failed (%s)", type(error).__name__)

    def _decide(self, record: Record, scores: list[Score] | None, started: float, reasked: bool = False,
                policy: str | None = None) -> Decision:
        policy = policy or self.policy
        answer = record.answer or ""
        if scores is None or any(s.error for s in scores):
            why = "not checked within the budget" if scores is None else "the check failed: " + "; ".join(
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
            return self._reasked(record, decision, started)
        if policy == "raise":
            raise GuardBlocked(_with(decision, action="raised", seconds=_since(started)))
        return _with(decision, action="replaced", text=self._fallback(record))

    def _reasked(self, record: Record, first: Decision, started: float) -> Decision:
        phrases = [s.text for s in first.spans]
        assert self._reask is not None  # the constructor refuses the reask policy without it
        try:
            answer = self._reask(record.question, list(record.contexts or []), record.answer or "", phrases)
        except Exception as error:
            log.warning("groundtrace guard: reask failed (%s): the fallback is delivered", type(error).__name__)
            return _with(first, action="replaced", text=self._fallback(record), seconds=_since(started))
        again = record.model_copy(update={"answer": answer})
        left = None if self.budget_ms is None else max(1.0, self.budget_ms - 1000 * (time.perf_counter() - started))
        decision = self._decide(again, self._scores(again, left), started, reasked=True)
        if decision.hallucinated is False:
            return decision
        return _with(decision, action="replaced", text=self._fallback(record),
                     reason=f"asked again, still unsupported: {decision.reason}")

    def _fallback(self, record: Record) -> str:
        language = record.language or guess_language(record.answer or "")
        return self.fallback.get(language) or self.fallback["en"]

    def _done(self, decision: Decision) -> Decision:
        self._count("checked", decision.action)
        return decision

    def _count(self, *names: str) -> None:
        with self._lock:
            self._counts.update(names)


class GuardedStream:
    """Iterate it for the pieces to send; ``decision`` is set when it is exhausted."""

    def __init__(self, guard: Guard, question: str | None, contexts: Sequence[str], chunks: Iterable[str],
                 language: str | None) -> None:
        self.guard, self.question, self.contexts, self.language = guard, question, list(contexts), language
        self._chunks = chunks
        self._sentences = _SentenceChecks(guard, question, self.contexts, language)
        self.decision: Decision | None = None
        self.held_back = 0  # the most characters held back at any time (at most one sentence and what follows it)

    def __iter__(self) -> Iterator[str]:
        if self.guard.policy == "flag":
            answer = []
            for chunk in self._chunks:
                answer.append(chunk)
                yield chunk
            self.decision = self.guard.check(self.question, self.contexts, "".join(answer), language=self.language)
            return
        buffer = ""
        for chunk in self._chunks:
            buffer += chunk
            self.held_back = max(self.held_back, len(buffer))
            sentence, buffer = _first_sentence(buffer)
            while sentence is not None:
                piece = self._sentences.checked(sentence)
                if piece:
                    yield piece
                if self._sentences.stopped:
                    self._close(self._chunks)
                    self.decision = self._sentences.decision()
                    return
                sentence, buffer = _first_sentence(buffer)
        if buffer:
            piece = self._sentences.checked(buffer)
            if piece:
                yield piece
        self.decision = self._sentences.decision()

    @staticmethod
    def _close(chunks: Any) -> None:
        close = getattr(chunks, "close", None)
        if callable(close):
            close()


class AsyncGuardedStream:
    """GuardedStream for async chunks: ``async for piece in guard.astream(...)``; checks run off the event loop."""

    def __init__(self, guard: Guard, question: str | None, contexts: Sequence[str], chunks: AsyncIterable[str],
                 language: str | None) -> None:
        self.guard, self.question, self.contexts, self.language = guard, question, list(contexts), language
        self._chunks = chunks
        self._sentences = _SentenceChecks(guard, question, self.contexts, language)
        self.decision: Decision | None = None
        self.held_back = 0

    async def __aiter__(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        if self.guard.policy == "flag":
            answer = []
            async for chunk in self._chunks:
                answer.append(chunk)
                yield chunk
            self.decision = await self.guard.acheck(self.question, self.contexts, "".join(answer),
                                                    language=self.language)
            return
        buffer = ""
        async for chunk in self._chunks:
            buffer += chunk
            self.held_back = max(self.held_back, len(buffer))
            sentence, buffer = _first_sentence(buffer)
            while sentence is not None:
                piece = await loop.run_in_executor(None, self._sentences.checked, sentence)
                if piece:
                    yield piece
                if self._sentences.stopped:
                    close = getattr(self._chunks, "aclose", None)
                    if callable(close):
                        await close()
                    self.decision = self._sentences.decision()
                    return
                sentence, buffer = _first_sentence(buffer)
        if buffer:
            piece = await loop.run_in_executor(None, self._sentences.checked, buffer)
            if piece:
                yield piece
        self.decision = self._sentences.decision()


class _SentenceChecks:
    """A streamed answer's sentences, each checked as it ends; what to send for each, and the decision."""

    def __init__(self, guard: Guard, question: str | None, contexts: list[str], language: str | None) -> None:
        self.guard, self.question, self.contexts, self.language = guard, question, contexts, language
        self.started = time.perf_counter()
        self.answer, self.sent = "", ""
        self.spans: list[Span] = []
        self.scores: list[Score] = []
        self.actions: list[Action] = []
        self.verdicts: list[bool | None] = []
        self.stopped = False
        self.waited = 0.0

    def checked(self, sentence: str) -> str:
        offset, self.answer = len(self.answer), self.answer + sentence
        began = time.perf_counter()
        record = _record(self.question, self.contexts, sentence, self.language)
        scores = self.guard._scores(record, self.guard.budget_ms)
        # in a stream what was sent cannot be asked for again (an unsupported sentence is replaced instead), and
        # redacting a sentence is leaving it out
        decision = self.guard._decide(record, scores, began,
                                      policy={"reask": "replace", "redact": "flag"}.get(self.guard.policy))
        self.waited += time.perf_counter() - began
        self.scores += decision.scores
        self.spans += [span.model_copy(update={"start": span.start + offset, "end": span.end + offset})
                       for span in decision.spans]
        action: Action = "redacted" if self.guard.policy == "redact" and decision.hallucinated else decision.action
        self.actions.append(action)
        self.verdicts.append(decision.hallucinated)
        if action in ("passed", "unchecked", "flagged"):
            piece = sentence
        elif action == "redacted":
            piece = ""
        else:  # replaced: the fallback ends the answer
            piece = ("" if not self.sent or self.sent[-1:].isspace() else " ") + decision.text
            self.stopped = True
        self.sent += piece
        return piece

    def decision(self) -> Decision:
        hallucinated = True if True in self.verdicts else None if None in self.verdicts else False
        action: Action = "replaced" if "replaced" in self.actions else "redacted" if "redacted" in self.actions else \
            "unchecked" if "unchecked" in self.actions else "passed"
        decision = Decision(action, hallucinated, self.sent, self.scores, self.spans, self.waited,
                            f"{len(self.actions)} sentence(s) checked: " + ", ".join(self.actions), self.answer)
        return self.guard._done(decision)


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


def _first_sentence(buffer: str) -> tuple[str | None, str]:
    """The first sentence of ``buffer`` with the blanks after it, once another sentence has begun after it."""
    sentences = split_sentences(buffer)
    if len(sentences) < 2:
        return None, buffer
    return buffer[: sentences[1].start], buffer[sentences[1].start:]


def _record(question: str | None, contexts: Sequence[str], answer: str, language: str | None) -> Record:
    if isinstance(contexts, str) or not all(isinstance(c, str) for c in contexts):
        raise TypeError("guard: contexts must be a list of strings (the passages the answer was written from)")
    return Record(question=question, contexts=list(contexts), answer=answer, language=language)


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
    ``on_score``."""
    return Guard(metrics, **options)
