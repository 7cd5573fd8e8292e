"""The Monitor's metrics read back through the OpenTelemetry SDK's own in-memory reader (nothing stands in
for the SDK), and a real Prometheus server for the tests that need one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from groundtrace.record import Record

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
FLAGGED = Record(id="ru-1", question="Сколько стоит общежитие?",
                 contexts=["Плата за проживание составляет 1 879 рублей в месяц."],
                 answer="Общежитие стоит 2 500 рублей в месяц.", trace_id=TRACE_ID, span_id=SPAN_ID)
GROUNDED = Record(id="en-1", question="When does the library open?",
                  contexts=["The library opens at 9:00 and closes at 18:00 on weekdays."],
                  answer="The library opens at 9:00 on weekdays.", trace_id="a" * 32, span_id="b" * 16)


@dataclass
class Point:
    name: str
    attributes: dict[str, Any]
    data: Any

    @property
    def value(self) -> float:
        return self.data.value


class Readings:
    """One collection of a provider's metrics, looked up by name and attributes."""

    def __init__(self, reader: InMemoryMetricReader) -> None:
        data = reader.get_metrics_data()
        resources = data.resource_metrics if data else []
        self.resources = [dict(resource.resource.attributes) for resource in resources]
        self.metrics = {metric.name: metric for resource in resources for scope in resource.scope_metrics
                        for metric in scope.metrics}
        self.points = [Point(metric.name, dict(point.attributes), point)
                       for resource in resources for scope in resource.scope_metrics for metric in scope.metrics
                       for point in metric.data.data_points]

    def metric(self, name: str) -> Any:
        """The metric itself (its unit, description, kind)."""
        return self.metrics[name]

    def named(self, name: str, **attributes: Any) -> list[Point]:
        return [p for p in self.points if p.name == name
                and all(p.attributes.get(key.replace("__", ".")) == value for key, value in attributes.items())]

    def one(self, name: str, **attributes: Any) -> Point:
        found = self.named(name, **attributes)
        assert len(found) == 1, (name, attributes, [p.attributes for p in self.named(name)])
        return found[0]

    def names(self) -> set[str]:
        return {p.name for p in self.points}


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider([reader], resource=Resource.create({"service.name": "rag-staging"}))
    reader.provider = provider  # type: ignore[attr-defined]
    yield reader
    provider.shutdown()


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """A Monitor with no sink writes nowhere, but the tests run in their own folder all the same."""
    monkeypatch.chdir(tmp_path)
    return tmp_path

