"""Keeping single calls out of scoring while the rest of the application is scored.

Two ways, both read when a root span starts:

    with groundtrace_llamaindex.exclude():
        engine.query("...")                                   # this adapter's own switch

    with instrument_tags({"groundtrace_exclude": True}):     # LlamaIndex's own tags
        engine.query("...")

An excluded root still reaches the Monitor, flagged ``metadata["groundtrace_exclude"] = True``,
so that it is counted as excluded instead of vanishing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from groundtrace.monitor import Monitor
from llama_index.core.instrumentation.dispatcher import active_instrument_tags

_excluded: ContextVar[bool] = ContextVar("groundtrace_llamaindex_excluded", default=False)


@contextmanager
def exclude() -> Iterator[None]:
    """Keep the LlamaIndex calls started inside this block (same thread or asyncio task) unscored."""
    token = _excluded.set(True)
    try:
        yield
    finally:
        _excluded.reset(token)


def is_excluded(tags: Mapping[str, Any] | None) -> bool:
    # a workflow's run span is opened with no tags: the instrument_tags in force are read instead
    if _excluded.get():
        return True
    tags = tags if tags is not None else active_instrument_tags.get()
    return bool(tags) and Monitor.excludes(tags)
