"""Where the demo's scores show up: an OpenTelemetry SDK tracer and, when mlflow is installed, MLflow
traces in a local sqlite store under the output folder.

Each question runs inside one request span of each (what a web framework or ``@mlflow.trace`` gives
a real application). The adapters read those spans' ids when the request starts, and the otel and
mlflow sinks attach every Score to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Answered = Callable[[str], None]
EVALUATION_ATTRIBUTE = "gen_ai.evaluation.name"


@dataclass
class SpanCounts:
    spans: int
    requests: int
    scored_requests: int  # request spans with at least one evaluation span below them
    evaluations: int  # spans carrying the gen_ai.evaluation.* / groundtrace.* attributes


class Tracing:
    """A real TracerProvider exporting to memory. It is not installed globally: the demo leaves the
    process as it found it, and the request spans it opens are all the adapters need."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "groundtrace-demo"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self._tracer = self.provider.get_tracer("groundtrace_demo")

    @contextmanager
    def request(self, framework: str, question: str) -> Iterator[Answered]:
        attributes = {"openinference.span.kind": "CHAIN", "input.value": question, "demo.framework": framework}
        with self._tracer.start_as_current_span(f"{framework} RAG request", attributes=attributes) as span:
            yield lambda answer: span.set_attribute("output.value", answer)

    def write(self, path: Path) -> SpanCounts:
        """Every finished span as one JSON line; what was found on them."""
        spans = self.exporter.get_finished_spans()
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(span.to_json(indent=None) + "\n" for span in spans)
        evaluations = [s for s in spans if EVALUATION_ATTRIBUTE in (s.attributes or {})]
        requests = {s.context.span_id for s in spans if s.parent is None}
        scored = {s.parent.span_id for s in evaluations if s.parent is not None} & requests
        return SpanCounts(len(spans), len(requests), len(scored), len(evaluations))

    def close(self) -> None:
        self.provider.shutdown()


class MLflowTraces:
    """MLflow tracing into ``folder``/mlflow.db (sqlite) and ``folder``/artifacts, never a remote
    server: the tracking URI is set for the demo and restored by close()."""

    EXPERIMENT = "groundtrace-demo"

    def __init__(self, folder: Path) -> None:
        import mlflow

        self._mlflow = mlflow
        # creating the store logs alembic migrations at INFO: noise in a demo's output
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
        folder.mkdir(parents=True, exist_ok=True)
        self.uri = f"sqlite:///{folder.resolve() / 'mlflow.db'}"
        self._previous = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(self.uri)
        experiment = mlflow.get_experiment_by_name(self.EXPERIMENT)
        experiment_id = experiment.experiment_id if experiment else mlflow.create_experiment(
            self.EXPERIMENT, artifact_location=(folder.resolve() / "artifacts").as_uri())
        mlflow.set_experiment(experiment_id=experiment_id)

    @contextmanager
    def request(self, framework: str, question: str) -> Iterator[Answered]:
        with self._mlflow.start_span(name=f"{framework} RAG request", span_type="CHAIN") as span:
            span.set_inputs({"question": question})
            yield lambda answer: span.set_outputs({"answer": answer})

    def feedback_count(self, trace_ids: list[str]) -> int:
        """groundtrace's Feedback assessments found on these traces, read back from the store."""
        found = 0
        for trace_id in trace_ids:
            trace = self._mlflow.get_trace(trace_id)
            assessments: list[Any] = trace.info.assessments if trace else []
            found += sum(1 for a in assessments if a.source and a.source.source_id == "groundtrace")
        return found

    def close(self) -> None:
        self._mlflow.set_tracking_uri(self._previous)
