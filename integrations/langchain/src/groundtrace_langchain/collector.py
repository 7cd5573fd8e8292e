"""The state of every root run in flight, in one process-wide object.

LangChain's configure hook may build a handler per invocation, and one handler serves many
concurrent runs, so no handler keeps state: they all share :data:`COLLECTOR`. State is keyed by
``(scope, run_id.int)``, where the scope is the handler's, so that two handlers on the same run (say,
one with a JSONL sink on an inner chain and one installed globally) each see their own root. (The
UUID's int, because UUID.__hash__ is Python code and this runs on every callback.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.documents import Document

Key = tuple[int, int]

# A root that never ends (a stream dropped without closing it) must not hold memory forever: past
# this many roots in flight, the oldest is forgotten and counted as evicted.
DEFAULT_MAX_ROOTS = 10_000


@dataclass(eq=False, slots=True)
class RootRun:
    """What one root run has shown so far."""

    run_id: UUID
    name: str | None
    inputs: Any
    tags: list[str]
    metadata: dict[str, Any]
    excluded: bool
    otel_ids: tuple[str, str] | None
    request_span: Any  # the adapter's own OpenTelemetry span, when it had to start one
    links: dict[str, str]
    query: str | None = None
    # one entry per retriever, in the order they started; None until (unless) it returns
    retrievals: dict[int, Sequence[Document] | None] = field(default_factory=dict)
    llm_response: Any = None  # the last LLM result, kept raw: read only if the output has no answer
    members: list[int] = field(default_factory=list)  # run_id.int of every tracked descendant


@dataclass
class CaptureStats:
    """Where every root run went. ``in_flight`` roots have started and not ended yet."""

    roots: int = 0
    recorded: int = 0  # a Record was submitted to the Monitor (which samples: see its stats)
    excluded: int = 0  # submitted marked excluded (metadata groundtrace_exclude)
    skipped: int = 0  # ended without retrieval (not a RAG answer) or without an answer: nothing to score
    failed: int = 0  # the root raised: nothing is scored
    evicted: int = 0  # forgotten past max_roots
    callback_errors: int = 0  # a callback of ours failed (logged; LangChain never sees it)
    in_flight: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Collector:
    def __init__(self, max_roots: int = DEFAULT_MAX_ROOTS) -> None:
        self.max_roots = max_roots
        self._lock = threading.Lock()
        self._roots: dict[Key, RootRun] = {}  # insertion order = start order, for eviction
        self._owners: dict[Key, RootRun] = {}  # every tracked run, root or descendant -> its root
        self._stats = CaptureStats()

    def add_root(self, scope: int, root: RootRun) -> list[RootRun]:
        """Track a new root; returns the roots evicted to make room (their spans need ending)."""
        key = (scope, root.run_id.int)
        evicted = []
        with self._lock:
            self._roots[key] = root
            self._owners[key] = root
            self._stats.roots += 1
            while len(self._roots) > self.max_roots:
                oldest_key = next(iter(self._roots))
                evicted.append(self._forget(oldest_key))
                self._stats.evicted += 1
        return evicted

    def adopt(self, scope: int, run_id: UUID, parent_run_id: UUID) -> RootRun | None:
        """Track a run under its parent's root; None if the parent is not tracked here."""
        with self._lock:
            root = self._owners.get((scope, parent_run_id.int))
            if root is not None:
                self._owners[(scope, run_id.int)] = root
                root.members.append(run_id.int)
            return root

    def adopt_retriever(self, scope: int, run_id: UUID, parent_run_id: UUID, query: str) -> RootRun | None:
        """Like :meth:`adopt`, and reserve the retriever's place in the root's retrieval order."""
        with self._lock:
            root = self._owners.get((scope, parent_run_id.int))
            if root is not None:
                self._owners[(scope, run_id.int)] = root
                root.members.append(run_id.int)
                root.retrievals[run_id.int] = None
                if root.query is None:
                    root.query = query
            return root

    def root_of(self, scope: int, run_id: UUID | None) -> RootRun | None:
        if run_id is None:
            return None
        return self._owners.get((scope, run_id.int))  # a single dict read: atomic, no lock needed

    def pop_root(self, scope: int, run_id: UUID) -> RootRun | None:
        """Stop tracking a root and all its runs; None if ``run_id`` is not a root of this scope."""
        key = (scope, run_id.int)
        if key not in self._roots:  # most ends are not roots' ends: answer those without the lock
            return None
        with self._lock:
            return self._forget(key) if key in self._roots else None

    def _forget(self, key: Key) -> RootRun:
        scope = key[0]
        root = self._roots.pop(key)
        self._owners.pop(key, None)
        for member in root.members:
            self._owners.pop((scope, member), None)
        return root

    def count(self, bucket: str) -> None:
        with self._lock:
            setattr(self._stats, bucket, getattr(self._stats, bucket) + 1)

    def stats(self) -> CaptureStats:
        with self._lock:
            stats = CaptureStats(**asdict(self._stats))
            stats.in_flight = len(self._roots)
        return stats

    def tracked_runs(self) -> int:
        """Runs of every kind still tracked (0 when nothing is in flight: nothing leaked)."""
        with self._lock:
            return len(self._owners)


COLLECTOR = Collector()
