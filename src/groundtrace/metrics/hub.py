"""What the metrics that run a model of the Hugging Face Hub (`lettuce`, `nli`) share: a backend that checks
the model is there without loading it (``preflight``) and loads it once per process (``warm_up``)."""

from __future__ import annotations

from typing import Protocol

from groundtrace.metrics.base import Metric


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
