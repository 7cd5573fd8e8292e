"""Sources read Records back from where an application's requests were already logged.

A source is named like ``otel-json:spans.json``, ``phoenix:PROJECT``, ``mlflow:EXPERIMENT``,
``langfuse[:PROJECT]`` or ``langsmith:PROJECT``. Each lives in its own module and imports its
platform's SDK lazily, like the sinks. Every source turns the platform's spans (or runs, or
observations) into :class:`~groundtrace.sources.spans.SpanView` objects and hands one trace at a
time to :func:`~groundtrace.sources.spans.assemble`, the one place that decides what the question,
the documents and the answer of a request are. A trace that is not a RAG request (no retrieval, no
answer) is skipped and counted under its reason, never guessed.

Each Record carries the platform's ids (``trace_id``/``span_id``, ``run_id``, ``trace_links``) so
the platform's sink attaches scores to the same trace, and in ``metadata["groundtrace.scored"]``
the names of the groundtrace metrics already on that trace, so a backfill skips them.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar

from groundtrace.config import Settings
from groundtrace.errors import GroundtraceError
from groundtrace.record import Record
from groundtrace.redaction import redact

#: Record.metadata key: names of the groundtrace metrics the source found already attached
SCORED_KEY = "groundtrace.scored"
#: Record.metadata key: which source read the record (``phoenix:my-app``)
SOURCE_KEY = "groundtrace.source"


@dataclass(frozen=True)
class SourceFilter:
    """What to read: requests that started in [since, until), at most ``limit`` of them, whose
    metadata (tags, where the platform has tags) hold every ``metadata`` key with that value."""

    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:  # a naive time means UTC, as the platforms store it
                object.__setattr__(self, name, value.replace(tzinfo=timezone.utc))
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit must be >= 0, got {self.limit}")
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"since ({self.since.isoformat()}) must be before until ({self.until.isoformat()})")

    def admits_time(self, started: datetime | None) -> bool:
        """Whether a request that started at ``started`` lies in the window (unknown: admitted)."""
        if started is None:
            return True
        if started.tzinfo is None:
            started = started.replace(tzinfo=timezone.utc)
        return (self.since is None or started >= self.since) and (self.until is None or started < self.until)

    def admits_metadata(self, metadata: Mapping[str, Any] | None, tags: Any = ()) -> bool:
        """Every wanted key=value is in ``metadata`` (compared as text; a dotted key reaches into
        nested metadata), or ``key:value``/``value`` is among ``tags`` for platforms whose tags are
        plain strings."""
        metadata = metadata or {}
        tags = {str(tag) for tag in tags or ()}
        for key, wanted in self.metadata.items():
            found = _lookup(metadata, key)
            if found is not _MISSING and str(found) == str(wanted):
                continue
            if f"{key}:{wanted}" in tags or f"{key}={wanted}" in tags or (key == "tag" and wanted in tags):
                continue
            return False
        return True


_MISSING = object()


def _lookup(metadata: Mapping[str, Any], key: str) -> Any:
    """``metadata[key]``, or for a dotted key the nested value (``user.tier`` in
    ``{"user": {"tier": ...}}``): platforms that flatten metadata (Phoenix) and those that keep it
    nested (OTLP files) answer the same ``--where``."""
    if key in metadata:
        return metadata[key]
    head, dot, rest = key.partition(".")
    if dot and isinstance(metadata.get(head), Mapping):
        return _lookup(metadata[head], rest)
    return _MISSING


@dataclass
class SourceStats:
    """What a source read: ``traces`` requests looked at; ``records`` yielded; ``skipped`` by reason
    ('no retrieval', 'no answer', 'filtered', ...). traces == records + sum(skipped)."""

    traces: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str) -> None:
        self.traces += 1
        self.skipped[reason] += 1

    def took(self) -> None:
        self.traces += 1
        self.records += 1

    def as_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "records": self.records, "skipped": dict(self.skipped)}


class SourceError(GroundtraceError, RuntimeError):
    """A source cannot be read: what is wrong and what to do next (SDK messages it quotes redacted)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class Source:
    """Reads Records from one platform. Subclasses set ``name`` and ``sink`` and implement
    :meth:`records`; ``target`` is the part of the spec after the colon (a path, a project)."""

    name: ClassVar[str]
    #: the sink that writes scores back onto this platform's traces (None: no such sink)
    sink: ClassVar[str | None] = None

    def __init__(self, target: str | None = None, *, settings: Settings | None = None, **options: Any) -> None:
        if options:  # what a subclass did not take is a typo, not something to ignore quietly
            raise ValueError(f"the {self.name} source has no option {', '.join(sorted(options))}")
        self.target = target
        self.settings = settings
        self.stats = SourceStats()

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.target}" if self.target else self.name

    def records(self, filters: SourceFilter | None = None) -> Iterator[Record]:
        raise NotImplementedError

    def close(self) -> None:
        """Release clients and files."""


_BUILTIN = {
    "otel-json": "groundtrace.sources.otel_json:OTelJsonSource",
    "phoenix": "groundtrace.sources.phoenix:PhoenixSource",
    "mlflow": "groundtrace.sources.mlflow:MLflowSource",
    "langfuse": "groundtrace.sources.langfuse:LangfuseSource",
    "langsmith": "groundtrace.sources.langsmith:LangSmithSource",
}


def source_names() -> list[str]:
    return sorted(_BUILTIN)


def source_class(name: str) -> type[Source]:
    target = _BUILTIN.get(name)
    if target is None:
        raise KeyError(f"unknown source '{name}'; available: {', '.join(source_names())} (e.g. otel-json:spans.json)")
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def open_source(spec: str, settings: Settings | None = None, **options: Any) -> Source:
    """The source a spec names: ``NAME`` or ``NAME:TARGET`` (``otel-json:spans.json``)."""
    name, _, target = spec.partition(":")
    return source_class(name.strip())(target.strip() or None, settings=settings, **options)


__all__ = ["SCORED_KEY", "SOURCE_KEY", "Source", "SourceError", "SourceFilter", "SourceStats", "open_source",
           "source_class", "source_names"]
