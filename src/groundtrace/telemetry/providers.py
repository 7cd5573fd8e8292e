"""Which MeterProvider the Monitor's metrics go to.

- the application's: the global one (``metrics.set_meter_provider``, opentelemetry-instrument), resolved
  when a record settles, so one the application installs after groundtrace started is still found;
- OTLP: a provider of groundtrace's own exporting over OTLP/HTTP (the ``otlp`` extra), one per endpoint
  and process, when the application has none and the OpenTelemetry variables ask for metrics;
- Prometheus: a provider of groundtrace's own with the OpenTelemetry Prometheus exporter (the
  ``prometheus`` extra) in prometheus_client's default registry, so an application that already serves
  that registry serves these too, and a scrape endpoint on HOST:PORT (groundtrace.telemetry.scrape: one per
  address, shared by the Monitors that name it, and by the processes of a server).

Each provider's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, read by the SDK) describes the
process once: over OTLP as the resource, on the scrape as ``target_info`` (OpenTelemetry's Prometheus
compatibility spec), never as attributes of every point.
"""

from __future__ import annotations

import threading
from typing import Any

from groundtrace._extras import missing_extra


def application_provider() -> Any | None:
    """The MeterProvider the application installed, or None while it has none (the API's proxy)."""
    from opentelemetry import metrics
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.metrics._internal import _ProxyMeterProvider  # the API's stand-in until one is set

    provider = metrics.get_meter_provider()
    return None if isinstance(provider, (_ProxyMeterProvider, NoOpMeterProvider)) else provider


def _sdk(extra: str, what: str) -> Any:
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
    except ImportError as error:
        raise missing_extra(extra, what, error) from None
    return MeterProvider, Resource


_own: dict[str, Any] = {}
_own_lock = threading.Lock()


def otlp_provider(endpoint: str) -> Any:
    """groundtrace's own provider exporting to ``endpoint`` over OTLP/HTTP (the SDK reads its export
    interval, OTEL_METRIC_EXPORT_INTERVAL, and the service name, OTEL_SERVICE_NAME, itself)."""
    with _own_lock:
        if f"otlp {endpoint}" not in _own:
            MeterProvider, Resource = _sdk("otlp", "sending the Monitor's metrics over OTLP")
            try:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
                from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            except ImportError as error:
                raise missing_extra("otlp", "sending the Monitor's metrics over OTLP", error) from None
            reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint))
            _own[f"otlp {endpoint}"] = MeterProvider([reader], resource=Resource.create())
        return _own[f"otlp {endpoint}"]


def prometheus_provider() -> Any:
    """groundtrace's own provider whose reader is the OpenTelemetry Prometheus exporter, registered once
    per process in prometheus_client's default registry (a second reader there would repeat every series).
    Its target_info carries the resource: Prometheus joins it to the series on job and instance."""
    with _own_lock:
        if "prometheus" not in _own:
            MeterProvider, Resource = _sdk("prometheus", "the Prometheus endpoint")
            try:
                from opentelemetry.exporter.prometheus import PrometheusMetricReader
                from prometheus_client import REGISTRY, CollectorRegistry
            except ImportError as error:
                raise missing_extra("prometheus", "the Prometheus endpoint", error) from None
            private = CollectorRegistry()
            try:
                reader = PrometheusMetricReader(registry=private)
                source: Any = private
            except TypeError:  # an exporter older than its registry argument registers in the default one
                reader = PrometheusMetricReader()
                source = reader._collector
                REGISTRY.unregister(source)
            _own["prometheus"] = MeterProvider([reader], resource=Resource.create())
            _own["prometheus families"] = families = Families(source)
            REGISTRY.register(families)
        return _own["prometheus"]


class Families:
    """groundtrace's series (and target_info) as prometheus_client families, one collection at a time: the
    exporter hands each collection's data to whichever caller takes it, so two at once could leave one empty
    (a scrape and the write for the shared scrape, groundtrace.telemetry.scrape)."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self._lock = threading.Lock()

    def describe(self) -> list[Any]:
        return []  # names unknown until collected: the registry does not collect to learn them

    def collect(self) -> list[Any]:
        with self._lock:
            return list(self._source.collect())


def own_families() -> list[Any]:
    """This process's groundtrace series, collected now (none before the Prometheus provider exists)."""
    families = _own.get("prometheus families")
    return families.collect() if families is not None else []


def recorded() -> bool:
    """Whether a Monitor recording on the Prometheus provider in this process was offered a record."""
    from groundtrace.telemetry.instruments import instruments_for

    return "prometheus" in _own and instruments_for(_own["prometheus"]).recorded()
