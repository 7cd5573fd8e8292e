"""Which MeterProvider the Monitor's metrics go to.

- the application's: the global one (``metrics.set_meter_provider``, opentelemetry-instrument), resolved
  when a record settles, so one the application installs after groundtrace started is still found;
- OTLP: a provider of groundtrace's own exporting over OTLP/HTTP (the ``otlp`` extra), one per endpoint
  and process, when the application has none and the OpenTelemetry variables ask for metrics;
- Prometheus: a provider of groundtrace's own with the OpenTelemetry Prometheus exporter (the
  ``prometheus`` extra) in prometheus_client's default registry, so an application that already serves
  that registry serves these too, and a scrape endpoint on HOST:PORT (one per address, shared by the
  Monitors that name it, stopped when the last of them closes).

Each provider's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, read by the SDK) describes the
process once: over OTLP as the resource, on the scrape as ``target_info`` (OpenTelemetry's Prometheus
compatibility spec), never as attributes of every point.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.telemetry")


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
            except ImportError as error:
                raise missing_extra("prometheus", "the Prometheus endpoint", error) from None
            reader = PrometheusMetricReader()
            _own["prometheus"] = MeterProvider([reader], resource=Resource.create())
        return _own["prometheus"]


@dataclass
class Endpoint:
    """A scrape endpoint over prometheus_client's default registry (telemetry.endpoint: cached, bounded)."""

    host: str
    port: int
    server: Any
    thread: Any
    users: int = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


_endpoints: dict[tuple[str, int], Endpoint] = {}


def open_endpoint(host: str, port: int) -> Endpoint:
    """The scrape endpoint on ``host:port`` (port 0: a free port, given in the answer), started on first
    use; each open_endpoint() is matched by one close_endpoint()."""
    from groundtrace.telemetry.endpoint import serve

    with _own_lock:
        endpoint = _endpoints.get((host, port)) if port else None
        if endpoint is None:
            try:
                server, thread, _ = serve(host, port)  # a cached exposition, a few scrapes at once
            except OSError as error:  # a port in use, an address not of this machine: a setting to change
                raise OSError(f"the Prometheus endpoint cannot listen on {host}:{port}: {error}; name another "
                              "with telemetry='prometheus:HOST:PORT' or OTEL_EXPORTER_PROMETHEUS_HOST/_PORT") from error
            endpoint = Endpoint(host, server.server_address[1], server, thread)
            _endpoints[(host, endpoint.port)] = endpoint
            log.info("groundtrace: Prometheus endpoint at %s", endpoint.url)
        endpoint.users += 1
        return endpoint


def close_endpoint(endpoint: Endpoint) -> None:
    with _own_lock:
        endpoint.users -= 1
        if endpoint.users > 0:
            return
        _endpoints.pop((endpoint.host, endpoint.port), None)
    endpoint.server.shutdown()
    endpoint.server.server_close()
    endpoint.thread.join(timeout=5.0)
