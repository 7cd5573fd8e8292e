"""The state of every root run in flight, in one process-wide object.

LangChain's configure hook may build a handler per invocation, and one handler serves many
concurrent runs, so no handler keeps state: they all share :data:`COLLECTOR`. State is keyed by
``(scope, run key)``, where the scope is the handler's, so that two handlers on the same run (say,
one with a JSONL sink on an inner chain and one installed globally) each see their own root. The run
key is events.py's: the UUID's int (UUID.__hash__ is Python code, and this runs on every callback).

Callbacks only store references here (the documents, the tool's output, the model's messages);
nothing is rendered to text before the root ends (records.py).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundtrace.capture.earlier_turns import EarlierCalls
from groundtrace.capture.marked import Retrieved
from groundtrace.redaction import failure_text, get_logger
from groundtrace.capture.turn import ModelCall, Turn
from groundtrace.capture.stats import CaptureCounter, CaptureStats
from langchain_core.documents import Document

from groundtrace_langchain.events import RunKey
from groundtrace_langchain.extract import is_error, tool_output_text

Key = tuple[int, RunKey]

# ended roots whose tool calls wait to be filed for later turns (see Collector.ended)
ENDED_ROOTS = 256

# A root that never ends (a stream dropped without closing it) must not hold memory forever: past
# this many roots in flight, the oldest is forgotten and counted as evicted.
DEFAULT_MAX_ROOTS = 10_000
# A long agent loop keeps its last retrievals and tool calls; the answer's model call reads the
# recent ones, and older tool outputs still in its input come back from its messages.
MAX_SOURCES = 256
EVICTED_HINT = "evicted past max_roots, e.g. a stream dropped without closing it: raise max_roots or close your streams"
_UNSET: Any = object()
# the runs a guard wraps (groundtrace_langchain.guarded.GuardedRun), by run id, while they run: an application's
# handler on the same run hands its Monitor to the guard instead of scoring the answer again
GUARDED: dict[str, Any] = {}


@dataclass(eq=False, slots=True)
class Retrieval:
    """One retriever run: its query and, once it returns, its documents."""

    run: RunKey | int  # a retriever's run key; a @groundtrace.retrieval call's id()
    name: str | None
    query: str
    tool: RunKey | None  # the run of the tool it ran inside, if any
    nested: bool  # inside another retriever (a compression's base retriever): an internal step
    documents: Sequence[Document] | None = None
    # a call of a @groundtrace.retrieval function (its return value, read at the end), not a retriever run
    marked: Retrieved | None = None


@dataclass(eq=False, slots=True)
class ToolRun:
    """One tool run: its name, arguments and, once it returns, its output (kept raw)."""

    run: RunKey
    name: str | None
    inputs: Any
    call_id: str | None
    parent: RunKey | None = None  # the tool run it ran inside (a sub-agent's tool inside an agent-as-a-tool)
    output: Any = _UNSET
    # the tool raised (on_tool_error): the exception's type name; a handler (ToolNode's handle_tool_errors, a
    # wrap_tool_call middleware) may have put an error message in its place, which is never a context
    failed: str | None = None

    @property
    def ended(self) -> bool:
        return self.output is not _UNSET


@dataclass(eq=False, slots=True)
class RootRun:
    """What one root run has shown so far."""

    run_id: str  # as a Record carries it (events.run_text)
    key: RunKey  # the collector's (events.run_key)
    name: str | None
    inputs: Any
    tags: list[str]
    metadata: dict[str, Any]
    excluded: bool
    # the span the scores go on: the current one when the root started, else a tracer's (tracer_spans), else
    # the adapter's own, started at the root's end with the root's start time when nothing else traced it
    otel_ids: tuple[str, str] | None
    links: dict[str, str]
    started_ns: int = 0
    turn: Turn = field(default_factory=Turn)  # the model calls (input and output, kept raw)
    # retrievals and tool runs, in the order they started
    sources: list[Retrieval | ToolRun] = field(default_factory=list)
    retrievals: dict[RunKey, Retrieval] = field(default_factory=dict)
    tools: dict[RunKey, ToolRun] = field(default_factory=dict)
    pending: dict[RunKey, ModelCall] = field(default_factory=dict)  # model calls not ended yet
    # what reached the model when no retriever ran (groundtrace.capture.carried), kept as references and read
    # at the end: (None, a prompt template's variables) or (the step's run, a step output that may hold contexts)
    carried: list[tuple[RunKey | None, Any]] = field(default_factory=list)
    # run -> (the tool run it is inside, whether it is inside a retriever), for runs inside either
    within: dict[RunKey, tuple[RunKey | None, bool]] = field(default_factory=dict)
    # (run key, its name) of every tracked descendant
    members: list[tuple[RunKey, str | None]] = field(default_factory=list)
    closed: bool = False  # ended or evicted: its runs are being forgotten
    # the conversation (records.session_of): RunnableWithMessageHistory's session_id, read from the
    # config of the root's first child, and groundtrace.session(...) when the root started
    history_session: str | None = None
    given_session: str | None = None
    config_unread: bool = True
    # the run id as the framework gave it: only to look up the tracers' own maps, which are keyed by it
    given_id: Any = None
    # why an event of this run could not be read (the first cause): the run makes no Record
    unreadable: str | None = None


class Collector:
    def __init__(self, max_roots: int = DEFAULT_MAX_ROOTS) -> None:
        self.max_roots = max_roots
        self._lock = threading.Lock()
        # insertion order = start order, for eviction. Public for one use: a handler tells a root's end
        # from the many other chain ends by one membership test, without the lock or a call
        self.roots: dict[Key, RootRun] = {}
        self._owners: dict[Key, RootRun] = {}  # every tracked run, root or descendant -> its root
        self.counts = CaptureCounter("LangChain")  # where every root went: see stats()
        # the tool calls of ended roots: a later turn of a thread reads them again (handlers come and go).
        # A root's end only appends its tool runs to `ended` (one atomic append on the application's
        # thread); the Monitor's worker files them into `earlier` (their text rendered, kept as a hash)
        # when it builds a Record, or a turn that looks one up does (earlier_calls()). Bounded: with
        # every record sampled out and no lookup, the oldest ended roots are dropped unread
        self._earlier = EarlierCalls()
        self.ended: deque[tuple[str, dict[RunKey, ToolRun]]] = deque(maxlen=ENDED_ROOTS)

    def add_root(self, scope: int, root: RootRun) -> list[RootRun]:
        """Track a new root; returns the roots evicted to make room (their spans need ending)."""
        key = (scope, root.key)
        evicted = []
        with self._lock:
            self.roots[key] = root
            self._owners[key] = root
            self.counts.root()
            while len(self.roots) > self.max_roots:
                oldest_key = next(iter(self.roots))
                evicted.append(self._forget(oldest_key))
        if evicted:
            self.counts.evicted(len(evicted), EVICTED_HINT)
        return evicted

    def _adopted(self, scope: int, run: RunKey, parent: RunKey) -> tuple[RootRun | None, tuple[RunKey | None, bool]]:
        """(Under the lock.) Track ``run`` under its parent's root; the root (None if the parent is
        not tracked here) and what the parent runs inside (its tool run, inside a retriever)."""
        root = self._owners.get((scope, parent))
        if root is None:
            return None, (None, False)
        self._owners[(scope, run)] = root
        root.members.append((run, None))
        return root, root.within.get(parent, (None, False))

    def adopt(self, scope: int, run: RunKey, parent: RunKey, name: str | None = None) -> RootRun | None:
        """Track a run under its parent's root; None if the parent is not tracked here.

        This runs for every chain step, so it takes no lock: each dict and list operation is
        atomic, and a root that ended meanwhile (its ``closed`` set before its runs are forgotten)
        is seen after the run was added, which then removes itself."""
        owners = self._owners
        root = owners.get((scope, parent))
        if root is None:
            return None
        key = (scope, run)
        owners[key] = root
        root.members.append((key[1], name))  # its name beside it (contexts_from): one append, atomic
        if root.within:  # only runs inside a tool or a retriever are noted there
            inside = root.within.get(parent)
            if inside is not None:
                root.within[key[1]] = inside
        if root.closed:
            owners.pop(key, None)
        return root

    def adopt_retriever(self, scope: int, run: RunKey, parent: RunKey, query: str,
                        name: str | None = None) -> RootRun | None:
        """Like :meth:`adopt`, and note the retrieval in the root's order of sources."""
        def note(root: RootRun, run: RunKey, tool: RunKey | None, nested: bool) -> Retrieval:
            root.within[run] = (tool, True)
            root.retrievals[run] = Retrieval(run, name, query, tool, nested)
            return root.retrievals[run]

        return self._adopt_source(scope, run, parent, note)

    def adopt_tool(self, scope: int, run: RunKey, parent: RunKey, name: str | None, inputs: Any,
                   call_id: str | None) -> RootRun | None:
        """Like :meth:`adopt`, and note the tool run in the root's order of sources."""
        def note(root: RootRun, run: RunKey, outer: RunKey | None, in_retriever: bool) -> ToolRun:
            root.within[run] = (run, in_retriever)
            root.tools[run] = ToolRun(run, name, inputs, call_id, outer)
            return root.tools[run]

        return self._adopt_source(scope, run, parent, note)

    def _adopt_source(self, scope: int, run: RunKey, parent: RunKey,
                      note: Callable[[RootRun, RunKey, Any, bool], Retrieval | ToolRun]) -> RootRun | None:
        """A retriever or tool run adopted into its parent's root (as :meth:`adopt`), noted by ``note`` (given
        the root, the run and where it runs: the tool it is inside, and whether inside a retriever) and added
        to the root's sources in order."""
        with self._lock:
            root, (within, inside) = self._adopted(scope, run, parent)
            if root is not None:
                self._add_source(root, note(root, run, within, inside))
            return root

    def add_marked(self, scope: int, parent: RunKey, retrieved: Retrieved) -> bool:
        """A @groundtrace.retrieval call made inside a tracked run: a retrieval of that run's root (inside the
        tool the run is in, if any). False if the run is not tracked here."""
        with self._lock:
            root = self._owners.get((scope, parent))
            if root is None or root.closed:
                return False
            tool, _ = root.within.get(parent, (None, False))
            retrieval = Retrieval(id(retrieved), retrieved.name, retrieved.query or "", tool, False, marked=retrieved)
            self._add_source(root, retrieval)
            return True

    @staticmethod
    def add_carried(root: RootRun, run: RunKey | None, value: Any) -> None:
        """Keep a reference to what may hold contexts (a prompt's variables, a step's output); bounded."""
        carried = root.carried
        carried.append((run, value))
        if len(carried) > MAX_SOURCES:
            del carried[0]

    @staticmethod
    def _add_source(root: RootRun, source: Retrieval | ToolRun) -> None:
        root.sources.append(source)
        if len(root.sources) > MAX_SOURCES:
            oldest = root.sources.pop(0)
            root.retrievals.pop(oldest.run, None)
            root.tools.pop(oldest.run, None)

    def earlier_calls(self) -> EarlierCalls:
        """The tool calls of the roots that have ended, with those ended since the last look filed in."""
        if self.ended:
            with self._lock:
                while self.ended:
                    turn, tools = self.ended.popleft()
                    for tool in list(tools.values()):
                        text = tool_output_text(tool.output) if tool.call_id and tool.ended else None
                        if text and tool.call_id:
                            self._earlier.remember(tool.call_id, text, turn, tool.failed is not None or is_error(tool.output))
        return self._earlier

    def root_of(self, scope: int, run: RunKey | None) -> RootRun | None:
        if run is None:
            return None
        return self._owners.get((scope, run))  # a single dict read: atomic, no lock needed

    def pop_root(self, scope: int, run: RunKey) -> RootRun | None:
        """Stop tracking a root and all its runs; None if ``run`` is not a root of this scope."""
        key = (scope, run)
        if key not in self.roots:  # most ends are not roots' ends: answer those without the lock
            return None
        with self._lock:
            return self._forget(key) if key in self.roots else None

    def _forget(self, key: Key) -> RootRun:
        scope = key[0]
        root = self.roots.pop(key)
        root.closed = True  # before its runs go: a run adopted meanwhile sees it (adopt takes no lock)
        self._owners.pop(key, None)
        for member, _ in root.members:
            self._owners.pop((scope, member), None)
        return root

    def stats(self) -> CaptureStats:
        """Where every root went (groundtrace.capture.stats.CaptureStats)."""
        with self._lock:
            in_flight = len(self.roots)
        return self.counts.snapshot(in_flight)

    def tracked_runs(self) -> int:
        """Runs of every kind still tracked (0 when nothing is in flight: nothing leaked)."""
        with self._lock:
            return len(self._owners)


COLLECTOR = Collector()
log = get_logger("groundtrace.langchain")
_reported: set[tuple[str, str]] = set()


def report_failure(event: str, cause: str | None = None) -> None:
    """A callback of ours (or a Record's build in the Monitor's worker) failed: LangChain and the
    application never see it, and the run it belongs to makes no Record. Count it, log it at WARNING
    once per cause (``cause``: what could not be read, from events.py; else the exception's type), then quietly."""
    COLLECTOR.counts.callback_error()
    error = sys.exc_info()[1]
    kind = (event, cause or type(error).__name__)
    # said without the exception's message: it may quote the request's text, which no mask has seen yet
    said = cause if cause is not None else failure_text(error) if error else "?"
    if kind in _reported:
        log.debug("groundtrace: %s failed: %s", event, said)
    else:
        _reported.add(kind)
        what = "could not be read" if cause is not None else "failed"
        log.warning("groundtrace: LangChain: %s %s (%s): the run it belongs to makes no record (said once per "
                    "cause; counted in stats().callback_errors and no_record)", event, what, said)
