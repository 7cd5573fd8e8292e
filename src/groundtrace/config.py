"""Configuration from ``GROUNDTRACE_*`` environment variables, for turning scoring on in staging
without touching code.

    GROUNDTRACE_ENABLED          1/true/yes/on turns capture on (instrument() and the launcher read it)
    GROUNDTRACE_METRICS          comma-separated metric names (default: grounding; grounding,faithfulness
                                 when GROUNDTRACE_JUDGE_MODEL is set)
    GROUNDTRACE_SAMPLE_RATE      fraction of traces scored, 0..1 (default 1)
    GROUNDTRACE_SINKS            comma-separated sink names: otel, jsonl, langsmith, mlflow, phoenix, langfuse
    GROUNDTRACE_QUEUE_SIZE       records waiting for a worker before new ones are dropped (default 1000)
    GROUNDTRACE_WORKERS          background scoring threads (default 1)
    GROUNDTRACE_METRIC_TIMEOUT_S seconds one metric may take on one record (default 30)
    GROUNDTRACE_OPTIONS          metric options as JSON, e.g. {"facts": {"mode": "seed"}}
    GROUNDTRACE_ISOLATION        auto (default), process or thread: where the metrics run (see Monitor)
Each sink reads its own settings (GROUNDTRACE_JSONL_PATH, LANGSMITH_API_KEY, ...): see its module.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from groundtrace.metrics import default_metrics

_TRUE = {"1", "true", "yes", "on"}


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return (environ if environ is not None else os.environ).get(name, "").strip().lower() in _TRUE


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


@dataclass
class Settings:
    enabled: bool = False
    metrics: list[str] = field(default_factory=lambda: list(default_metrics()))
    sample_rate: float = 1.0
    sinks: list[str] = field(default_factory=list)
    queue_size: int = 1000
    workers: int = 1
    metric_timeout_s: float = 30.0
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    isolation: str = "auto"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = environ if environ is not None else os.environ
        defaults = cls()

        def number(name: str, default: float, kind: type) -> Any:
            raw = env.get(name)
            if raw is None or not raw.strip():
                return default
            try:
                return kind(raw)
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None

        options = env.get("GROUNDTRACE_OPTIONS")
        try:
            parsed_options = json.loads(options) if options else {}
        except json.JSONDecodeError as error:
            raise ValueError(f"GROUNDTRACE_OPTIONS is not valid JSON: {error}") from None
        return cls(
            enabled=env_flag("GROUNDTRACE_ENABLED", env),
            metrics=_split(env.get("GROUNDTRACE_METRICS")) or list(default_metrics(env)),
            sample_rate=number("GROUNDTRACE_SAMPLE_RATE", 1.0, float),
            sinks=_split(env.get("GROUNDTRACE_SINKS")),
            queue_size=number("GROUNDTRACE_QUEUE_SIZE", defaults.queue_size, int),
            workers=number("GROUNDTRACE_WORKERS", defaults.workers, int),
            metric_timeout_s=number("GROUNDTRACE_METRIC_TIMEOUT_S", defaults.metric_timeout_s, float),
            options=parsed_options,
            isolation=env.get("GROUNDTRACE_ISOLATION", "").strip() or defaults.isolation,
        )

    def monitor(self, **overrides: Any):
        from groundtrace.monitor import Monitor

        arguments = dict(metrics=self.metrics, sinks=self.sinks, sample_rate=self.sample_rate,
                         queue_size=self.queue_size, workers=self.workers,
                         metric_timeout_s=self.metric_timeout_s, options=self.options, isolation=self.isolation)
        arguments.update(overrides)
        return Monitor(**arguments)


_shared = None
_shared_lock = threading.Lock()


def shared_monitor():
    """The process-wide Monitor configured from the environment, created on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Settings.from_env().monitor()
        return _shared


def reset_shared_monitor() -> None:
    """Close and forget the shared Monitor (tests, and uninstrument())."""
    global _shared
    with _shared_lock:
        monitor, _shared = _shared, None
    if monitor is not None:
        monitor.close()


_shared_users = 0


def acquire_shared_monitor():
    """shared_monitor() for an integration that gives it back with release_shared_monitor(), so
    that uninstrumenting one framework does not close the Monitor another one still uses."""
    global _shared_users
    monitor = shared_monitor()
    with _shared_lock:
        _shared_users += 1
    return monitor


def release_shared_monitor() -> None:
    """Close the shared Monitor when the last integration using it lets go."""
    global _shared_users
    with _shared_lock:
        _shared_users = max(0, _shared_users - 1)
        last = _shared_users == 0
    if last:
        reset_shared_monitor()
