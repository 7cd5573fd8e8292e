"""What the metrics that run a model of the Hugging Face Hub (`lettuce`, `nli`) share: a backend that checks
the model is there without loading it (``preflight``) and loads it once per process (``warm_up``)."""

from __future__ import annotations

from typing import Any, Protocol

from groundtrace._extras import MissingExtraError, ModelUnavailableError
from groundtrace.backends.breaker import CircuitBreaker
from groundtrace.metrics.base import Metric, Result


class HubBackend(Protocol):
    model: str

    def check(self) -> None: ...

    def warm_up(self) -> None: ...


class HubModelMetric(Metric):
    backend: HubBackend

    def preflight(self) -> None:
        self.backend.check()

    def prepare(self) -> None:
        self.backend.warm_up()  # a failure is remembered by the backend: each record gets it as its error Score

    def run_compute(self, record: Any, language: str) -> Result:
        """The model's inference behind a circuit breaker: a model that keeps failing (out of memory, a broken
        device) gives its records an error Score at once for a while, then one record tries it again."""
        breaker = self.__dict__.get("_breaker")
        if breaker is None:
            breaker = self.__dict__["_breaker"] = CircuitBreaker(f"the {self.name} model {self.backend.model!r}")
        breaker.before()
        try:
            result = self.compute(record, language)
        except (MissingExtraError, ModelUnavailableError):  # a setting to change, said once: not a fault to wait out
            breaker.succeeded()
            raise
        except Exception as error:
            breaker.failed(type(error).__name__)
            raise
        breaker.succeeded()
        return result
