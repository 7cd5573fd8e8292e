"""The Monitor's own metrics: scores, flagged rates and groundtrace's health as OpenTelemetry metrics.

Where they go (``Monitor(telemetry=...)``, GROUNDTRACE_TELEMETRY):

- ``"auto"`` (default): the application's MeterProvider, as soon as it has one; else, when the
  OpenTelemetry variables ask for metrics over OTLP (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or
  OTEL_METRICS_EXPORTER=otlp with OTEL_EXPORTER_OTLP_ENDPOINT), a provider of groundtrace's own that
  exports there; else nowhere (and nothing is counted beyond the Monitor's own stats);
- ``"otlp"``: that OTLP provider, and an error when no variable names an endpoint;
- ``"prometheus"``, ``"prometheus:PORT"``, ``"prometheus:HOST:PORT"``: a scrape endpoint, with the
  OpenTelemetry Prometheus exporter (default address: OTEL_EXPORTER_PROMETHEUS_HOST and _PORT, else
  localhost:9464; port 0 picks a free one, see ``monitor.telemetry.endpoint``); the processes of a server
  that name one port share it, a scrape showing their sum (groundtrace.telemetry.scrape);
- a MeterProvider object: that one; ``"none"`` or None: no metrics.

What is recorded, and where: see groundtrace.telemetry.instruments (the instruments) and
groundtrace.telemetry.series (one Monitor's counts, on its worker threads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from groundtrace.config import Settings, check_telemetry
from groundtrace.telemetry.evaluations import Evaluations, summarize


class _Lazy:
    """Telemetry "auto" before the application has a MeterProvider: looks again at most once a second
    (an application often installs its provider after groundtrace has started)."""

    def __init__(self) -> None:
        self._next = 0.0

    def __call__(self) -> Any:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + 1.0
        from groundtrace.telemetry.instruments import instruments_for
        from groundtrace.telemetry.providers import application_provider

        provider = application_provider()
        return None if provider is None else instruments_for(provider)


def _fixed(instruments: Any) -> Callable[[], Any]:
    return lambda: instruments


def _api_installed() -> bool:
    try:
        import opentelemetry.metrics  # noqa: F401
    except ImportError:
        return False
    return True


def _prometheus_address(spec: str, settings: Settings) -> tuple[str, int]:
    address = spec.partition(":")[2]
    if not address:
        return settings.prometheus_host, settings.prometheus_port
    host, _, port = address.rpartition(":")
    return host.strip("[]") or settings.prometheus_host, int(port)


def build_telemetry(spec: Any, settings: Settings | None, monitor: Any, counts: Any,
                    metric_names: Sequence[str]) -> Any:
    """The MonitorSeries that records ``monitor``'s metrics where ``spec`` says (None: nowhere).
    ``counts``: the Monitor's MonitorStats object; ``settings``: read for the addresses (the environment's
    when None and the spec needs one)."""
    if spec is None or spec == "none":
        return None
    from_provider = not isinstance(spec, str)
    if not from_provider:
        check_telemetry(spec)
        if spec == "auto" and not _api_installed():
            return None
    from groundtrace.telemetry.instruments import instruments_for
    from groundtrace.telemetry.providers import application_provider, otlp_provider, prometheus_provider
    from groundtrace.telemetry.scrape import close_endpoint, open_endpoint
    from groundtrace.telemetry.series import MonitorSeries

    bind: Callable[[], Any]
    on_close: Callable[[], None] | None = None
    endpoint = None
    if from_provider:
        bind = _fixed(instruments_for(spec))
    elif spec == "auto":
        provider = application_provider()
        endpoint_url = (settings or Settings()).otlp_metrics_endpoint if provider is None else None
        if provider is None and endpoint_url:
            provider = otlp_provider(endpoint_url)
            on_close = provider.force_flush
        bind = _Lazy() if provider is None else _fixed(instruments_for(provider))
    elif spec == "otlp":
        endpoint_url = (settings or Settings.from_env()).otlp_metrics_endpoint
        if not endpoint_url:
            raise ValueError("telemetry 'otlp' needs an endpoint: set OTEL_EXPORTER_OTLP_METRICS_ENDPOINT "
                             "(e.g. http://127.0.0.1:4318/v1/metrics)")
        provider = otlp_provider(endpoint_url)
        bind, on_close = _fixed(instruments_for(provider)), provider.force_flush
    else:  # prometheus
        bind = _fixed(instruments_for(prometheus_provider()))
        configured = settings or Settings.from_env()
        endpoint = open_endpoint(*_prometheus_address(spec, configured), configured.prometheus_multiproc_dir)
        on_close = lambda: close_endpoint(endpoint)  # noqa: E731
    series = MonitorSeries(monitor, counts, metric_names, bind, on_close)
    series.endpoint = endpoint
    return series


__all__ = ["Evaluations", "build_telemetry", "summarize"]
