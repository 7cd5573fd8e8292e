"""Metric registry: names to classes, imported only when first asked for."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from groundtrace.metrics.base import Metric, Result

# name -> "module:Class"; third-party metrics register through the "groundtrace.metrics" entry point.
_BUILTIN = {
    "lexical": "groundtrace.metrics.lexical:LexicalMetric",
    "facts": "groundtrace.metrics.facts:FactsMetric",
}
_registered: dict[str, type[Metric]] = {}


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Make a Metric subclass available by its name (usable as a class decorator)."""
    _registered[cls.name] = cls
    return cls


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="groundtrace.metrics")}


def metric_names() -> list[str]:
    return sorted({*_BUILTIN, *_registered, *_plugins()})


def metric_class(name: str) -> type[Metric]:
    if name in _registered:
        return _registered[name]
    target = _BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise KeyError(f"unknown metric '{name}'; available: {', '.join(metric_names())}")
    module, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    _registered[name] = cls
    return cls


def get_metric(spec: str | Metric, **options: Any) -> Metric:
    """A metric instance from a name (with constructor options) or an instance (returned as is)."""
    if isinstance(spec, Metric):
        return spec
    return metric_class(spec)(**options)


__all__ = ["Metric", "Result", "get_metric", "metric_class", "metric_names", "register_metric"]
