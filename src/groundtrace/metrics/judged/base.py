"""JudgeMetric: the base of every LLM-as-judge metric.

It owns the :class:`~groundtrace.backends.judge.JudgeClient` (built lazily, shared by every judge
metric with the same settings, so they share the structured-output mode detection, the
concurrency limit and the cache), renders the metric's prompt files with the evaluated texts
fenced as data, and turns every :class:`~groundtrace.backends.judge.JudgeError` into an error Score
whose reason says what failed and what to do. A judge Score carries the cost of every request
made for it (``Score.cost``) and ``details["judge"]``: model, structured-output mode, requests,
cache hits, and one line per judge call.

Options every judge metric takes (``-O METRIC.KEY=VALUE`` on the command line): ``client`` (a
ready :class:`~groundtrace.backends.judge.JudgeClient`), or else the client's own keywords, which
are passed on to it unchanged (:data:`~groundtrace.backends.judge.CLIENT_OPTIONS`: ``model``,
``base_url``, ``api_key`` (default: ``GROUNDTRACE_JUDGE_MODEL``, ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``), ``timeout_s``, ``max_retries``, ``concurrency``, ``cache``, ``cache_dir``,
``mode`` (force a structured-output mode), ``prices``, ...); and the metric's own: ``max_tokens``
(per judge call), ``n`` (samples of each scoring call, averaged: self-consistency) and
``temperature`` (0, or 0.7 when ``n > 1``).
Extraction steps (statements, key points) always run once at temperature 0, so that the samples
of the scoring step judge the same items.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from groundtrace.backends.judge import CLIENT_OPTIONS, JudgeClient, JudgeError, JudgeResult, no_endpoint, shared_client
from groundtrace.metrics.base import Metric, Result
from groundtrace.metrics.judged import prompts
from groundtrace.record import Record
from groundtrace.score import Cost, Score

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")


def add_costs(costs: Sequence[Cost]) -> Cost:
    """Tokens add up; dollars too, unless some call's model has no price (then None)."""
    priced = [c.usd for c in costs if c.usd is not None]
    return Cost(
        input_tokens=sum(c.input_tokens for c in costs),
        output_tokens=sum(c.output_tokens for c in costs),
        usd=sum(priced) if len(priced) == len(costs) else None,
    )


class JudgeRun:
    """The judge calls made for one Score: it asks, and it keeps the account."""

    def __init__(self, metric: JudgeMetric, language: str = "en") -> None:
        self.metric = metric
        self.language = language
        self.calls: list[dict[str, Any]] = []
        self.results: list[JudgeResult] = []
        self.failure: JudgeError | None = None
        self._lock = threading.Lock()

    def ask(
        self,
        prompt: str,
        schema: type[T],
        data: Mapping[str, str | Sequence[str] | None],
        *,
        params: Mapping[str, Any] | None = None,
        sample: bool = False,
    ) -> list[T]:
        """Ask prompt ``prompt``; ``sample=True`` marks the scoring step (``n`` samples at the
        metric's temperature), otherwise one answer at temperature 0. Raises JudgeError."""
        metric = self.metric
        messages = prompts.render(prompt, data, language=self.language, params=params)
        n, temperature = (metric.n, metric.temperature) if sample else (1, 0.0)
        result = metric.client.complete(messages, schema, n=n, temperature=temperature, name=schema.__name__,
                                        max_tokens=metric.max_tokens)
        with self._lock:
            self.results.append(result)
            self.calls.append({"prompt": prompt, "mode": result.mode, "cached": result.cached, "requests": result.requests,
                               "latency_ms": round(result.latency_ms, 1), "input_tokens": result.cost.input_tokens,
                               "output_tokens": result.cost.output_tokens})
        return result.parsed

    def parallel(self, *steps: Callable[[], R]) -> list[R]:
        """Run independent steps at once (the client's concurrency limit still applies)."""
        if len(steps) == 1:
            return [steps[0]()]
        with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="groundtrace-judge") as pool:
            futures = [pool.submit(step) for step in steps]
            return [f.result() for f in futures]  # the first JudgeError propagates

    @property
    def cost(self) -> Cost:
        return add_costs([r.cost for r in self.results])

    def summary(self) -> dict[str, Any]:
        metric = self.metric
        modes = sorted({r.mode for r in self.results})
        return {
            "model": metric._client.model if metric._client is not None else metric.client_options.get("model"),
            "mode": modes[0] if len(modes) == 1 else modes,
            "requests": sum(r.requests for r in self.results),
            "cached": sum(1 for r in self.results if r.cached),
            "samples": metric.n,
            "calls": self.calls,
        }


class JudgeMetric(Metric):
    """Base class of the judge metrics: subclasses implement :meth:`judge` with ``run.ask``."""

    requires: ClassVar[tuple[str, ...]] = ("answer", "contexts")
    waits_on_io: ClassVar[bool] = True  # bound by the endpoint's latency, not by this machine's CPU
    #: the prompt files this metric uses (checked to exist when the metric is built)
    prompt_files: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        client: JudgeClient | None = None,
        n: int = 1,
        temperature: float | None = None,
        max_tokens: int | None = 1024,
        **options: Any,
    ) -> None:
        client_options = {name: options.pop(name) for name in list(options) if name in CLIENT_OPTIONS}
        if client is not None and client_options:
            raise ValueError(f"{self.name}: pass either client= or the client's options "
                             f"({', '.join(sorted(client_options))}), not both")
        super().__init__(**options)
        if int(n) < 1:
            raise ValueError(f"{self.name}: n (samples per scoring call) must be at least 1, got {n}")
        self.n = int(n)
        self.temperature = float(temperature) if temperature is not None else (0.0 if self.n == 1 else 0.7)
        self.max_tokens = max_tokens
        #: what builds the client on first use (the JudgeClient keywords: model, base_url, ...)
        self.client_options: dict[str, Any] = client_options
        self._client = client
        self._local = threading.local()
        for name in self.prompt_files:
            prompts.load(name)  # a missing or broken prompt file fails here, not on the first record

    @property
    def client(self) -> JudgeClient:
        """The judge client, built on first use (so listing metrics needs neither openai nor a key)."""
        if self._client is None:
            self._client = shared_client(**self.client_options)
        return self._client

    def preflight(self) -> None:
        """A batch with no judge to call stops here, before its first record, saying what to set."""
        if self._client is not None:
            return
        options = self.client_options
        missing = no_endpoint(options.get("base_url"), options.get("api_key"), options.get("settings"))
        if missing:
            raise JudgeError(f"{self.name} needs a judge: {missing}, or -O {self.name}.base_url=URL "
                             "(base_url= in Python)", kind="config")

    # ------------------------------------------------------------------ what subclasses implement
    def judge(self, record: Record, run: JudgeRun) -> Result:
        raise NotImplementedError

    # ---------------------------------------------------------------------------------- plumbing
    def compute(self, record: Record, language: str) -> Result:
        run = getattr(self._local, "run", None) or JudgeRun(self)
        run.language = language
        try:
            return self.judge(record, run)
        except JudgeError as error:
            run.failure = error
            return Result(0.0, "")  # a placeholder: score() turns it into the error Score

    def score(self, record: Record | Any) -> Score:
        """As :meth:`Metric.score`, plus the judge's cost and account; never raises."""
        run = self._local.run = JudgeRun(self)
        try:
            score = super().score(record)
        finally:
            self._local.run = None
        if run.failure is not None:
            error = run.failure
            message = f"judge error ({error.kind}): {error}"
            return Score(
                metric=self.name, value=None, higher_is_better=self.higher_is_better, error=message, reason=message,
                details={"judge": run.summary(), "error_kind": error.kind, "status": error.status},
                latency_ms=score.latency_ms, cost=run.cost, record_id=score.record_id,
            )
        if not score.ok or not run.results:
            return score if not run.results else score.model_copy(update={"cost": run.cost})
        return score.model_copy(update={"cost": run.cost, "details": {**score.details, "judge": run.summary()}})


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
