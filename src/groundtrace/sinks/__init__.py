"""Sinks deliver Scores to where engineers look: the trace of the request, or a file.

A sink is any object with ``emit(record, scores)``; it reads Records and Scores and never imports
metrics. Everything else is optional and looked up safely, here and only here (:func:`sink_name`,
:func:`sink_trace_link`, :func:`sink_undeliverable`, :func:`flush_sinks`, :func:`close_sinks`):
``name`` (for log lines), ``trace_link``, ``undeliverable()``, ``flush()`` and ``close()`` (without
it, ``flush()`` is what closing does). The built-in sinks subclass :class:`Sink`, which has them
all; a user's sink need not.

Each built-in sink lives in its own module and imports its SDK lazily, so choosing a sink by name
(``GROUNDTRACE_SINKS=otel,jsonl``) costs nothing for the sinks not chosen. A name may also be
``module:attribute``, a sink class or factory of your own. A sink built by name gets the
:class:`~groundtrace.config.Settings` (``from_settings``, where it has one). A sink whose trace
system has ids of its own (MLflow's ``tr-...``) names its lookup in ``trace_link``; the Monitor
and the capture kit register it with ``trace_context`` (:func:`register_trace_links`) before a
request is captured, never an import.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from groundtrace import trace_context
from groundtrace.config import Settings
from groundtrace.privacy import without_text
from groundtrace.record import Record
from groundtrace.redaction import RateLimitedWarning, get_logger
from groundtrace.score import Score

log = get_logger("groundtrace.sinks")


class Sink:
    """The base of the built-in sinks, with every optional part a sink may have. A sink of your own
    need not subclass it: an object with ``emit(record, scores)`` is enough."""

    name: ClassVar[str]
    #: (link name, lookup of the current request's id) for a trace system whose ids are not
    #: OpenTelemetry's; the lookup must be cheap and must never raise
    trace_link: ClassVar[tuple[str, Callable[[], str | None]] | None] = None
    #: True: a sink of this class named in the configuration may be built and fed by the Monitor's
    #: scoring process instead of the application's (all it needs comes from the Settings and the
    #: environment, and nothing of it must happen in the application's process)
    out_of_process: ClassVar[bool] = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Sink:
        """The sink as ``GROUNDTRACE_SINKS`` names it, configured from ``settings``."""
        return cls()

    def emit(self, record: Record, scores: list[Score]) -> None:
        raise NotImplementedError

    def undeliverable(self) -> str | None:
        """Why this sink cannot deliver anything from this process, and what to set (None: it can).
        A command line asks before it scores, rather than scoring into nowhere."""
        return None

    def flush(self) -> None:
        """Deliver anything buffered."""

    def close(self) -> None:
        self.flush()


_BUILTIN = {
    "jsonl": "groundtrace.sinks.jsonl:JsonlSink",
    "otel": "groundtrace.sinks.otel:OTelSink",
    "langsmith": "groundtrace.sinks.langsmith:LangSmithSink",
    "mlflow": "groundtrace.sinks.mlflow:MLflowSink",
    "phoenix": "groundtrace.sinks.phoenix:PhoenixSink",
    "langfuse": "groundtrace.sinks.langfuse:LangfuseSink",
}


def sink_names() -> list[str]:
    return sorted(_BUILTIN)


def _builtin_argument(name: str) -> tuple[str, str | None]:
    """``("jsonl", "out/scores.jsonl")`` for ``"jsonl:out/scores.jsonl"``: a built-in sink named with
    its argument; any other name comes back whole, with no argument."""
    head, colon, argument = name.partition(":")
    return (head, argument) if colon and head in _BUILTIN else (name, None)


def sink_class(name: str) -> Any:
    """The class a sink name stands for: a built-in name (``jsonl``, or ``jsonl:PATH``: a built-in with
    its argument), or ``module:attribute`` (a class or a factory of your own sink)."""
    name = _builtin_argument(name)[0]
    target = _BUILTIN.get(name)
    if target is None and ":" not in name:
        raise KeyError(f"unknown sink '{name}'; available: {', '.join(sink_names())}, or module:Class of your own")
    module, _, attribute = (target or name).partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        if target is not None:
            raise
        raise KeyError(f"sink '{name}' cannot be loaded: {error}") from None


def sink_list(spec: Sequence[Any] | str | None) -> list[Any]:
    """The sinks of a specification, names and instances, one per item (a string is split at commas)."""
    if spec is None:
        return []
    if isinstance(spec, str):
        return [s.strip() for s in spec.split(",") if s.strip()]
    return list(spec)


def _from_name(name: str, settings: Settings) -> Any:
    factory = sink_class(name)
    argument = _builtin_argument(name)[1]
    if argument is not None:
        from_argument = getattr(factory, "from_argument", None)
        if not callable(from_argument):
            raise KeyError(f"sink '{name}': the {factory.name} sink takes no argument after ':'")
        if not argument.strip():
            raise KeyError(f"sink '{name}': nothing after ':' (e.g. jsonl:out/scores.jsonl)")
        return from_argument(argument.strip(), settings)
    from_settings = getattr(factory, "from_settings", None)
    return from_settings(settings) if callable(from_settings) else factory()


def check_sink(sink: Any) -> Any:
    """``sink`` if it can be one (it has a callable ``emit``); else a TypeError that says why."""
    if isinstance(sink, type):
        raise TypeError(f"{sink.__name__} is a class: pass an instance of it as a sink")
    if not callable(getattr(sink, "emit", None)):
        raise TypeError(f"a sink needs an emit(record, scores) method; {type(sink).__name__} has none")
    return sink


def build_sinks(spec: Sequence[Any] | str | None, settings: Settings | None = None, *,
                tolerant: bool = False) -> list[Any]:
    """Sink instances from names (configured from ``settings``, else the environment) or instances.

    ``tolerant`` (live capture: the application must not fail because of a sink): a sink named right that
    cannot be built here (its extra is missing, its file cannot be opened, its server is not reachable) is
    left out with one WARNING naming it and why, and the others are built; a name that is no sink, or an
    object that is none, is a programming error and raises either way."""
    spec = sink_list(spec)
    if not any(isinstance(s, str) for s in spec):
        return [check_sink(s) for s in spec]
    configured = settings if settings is not None else Settings.from_env()
    built = []
    for item in spec:
        if not isinstance(item, str):
            built.append(check_sink(item))
            continue
        sink_class(item)  # an unknown name raises KeyError here, tolerant or not
        try:
            built.append(check_sink(_from_name(item, configured)))
        except (KeyError, TypeError):
            raise
        except Exception as error:
            if not tolerant:
                raise
            log.warning("groundtrace: the %s sink is off: it could not be built here (%s). The other sinks and "
                        "scoring go on; fix it and restart to have it", item, error)
    return built


# ------------------------------------------------------------ the optional parts of a sink, looked up safely
def _optional(sink: Any, method: str) -> Callable[[], Any] | None:
    found = getattr(sink, method, None)
    return found if callable(found) else None


def sink_name(sink: Any) -> str:
    """The sink's ``name``, else its class's name."""
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def sink_trace_link(sink: Any) -> tuple[str, Callable[[], str | None]] | None:
    """The sink's ``trace_link`` (link name, lookup), or None when it has none or it is malformed."""
    link = getattr(sink, "trace_link", None)
    if isinstance(link, tuple) and len(link) == 2 and isinstance(link[0], str) and callable(link[1]):
        return link
    if link is not None:
        log.warning("groundtrace: sink %s has a trace_link that is not (name, lookup): ignored", sink_name(sink))
    return None


def sink_undeliverable(sink: Any) -> str | None:
    """Why the sink cannot deliver from this process (its ``undeliverable()``), or None."""
    check = _optional(sink, "undeliverable")
    if check is None:
        return None
    try:
        reason = check()
    except Exception as error:
        return f"its undeliverable() check failed: {type(error).__name__}: {error}"
    return str(reason) if reason else None


#: seconds a sink's close() or flush() may take: at exit nothing a sink does may hold the process
SINK_CALL_TIMEOUT_S = 10.0


def _each(sinks: Sequence[Any], methods: tuple[str, ...], doing: str, timeout_s: float) -> list[str]:
    """Call each sink's first method of ``methods``, all at once, each in a daemon thread: one that raises or does
    not return within ``timeout_s`` (a client whose close waits on a lock its stuck emit holds) is a problem
    returned, never raised, and never waited for beyond the bound."""
    calls = [(sink, call) for sink in sinks
             if (call := next(filter(None, (_optional(sink, method) for method in methods)), None)) is not None]
    if not calls:
        return []
    outcomes: dict[int, BaseException | None] = {}

    def run(index: int, call: Any) -> None:
        try:
            call()
            outcomes[index] = None
        except BaseException as error:  # reported below, with the sink's name
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(i, call), name=f"groundtrace-sink-{doing}", daemon=True)
               for i, (_, call) in enumerate(calls)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    problems = []
    for i, (sink, _) in enumerate(calls):
        if i not in outcomes:
            problems.append(f"{doing} sink {sink_name(sink)} did not return within {timeout_s:g} s: left behind")
        elif outcomes[i] is not None:
            problems.append(f"{doing} sink {sink_name(sink)} failed: {outcomes[i]}")
    return problems


def flush_sinks(sinks: Sequence[Any], timeout_s: float = SINK_CALL_TIMEOUT_S) -> list[str]:
    """Deliver what each sink buffered (its ``flush()``, where it has one); one that fails or hangs is
    reported in the returned messages, never raised."""
    return _each(sinks, ("flush",), "flushing", timeout_s)


def close_sinks(sinks: Sequence[Any], timeout_s: float = SINK_CALL_TIMEOUT_S) -> list[str]:
    """Close each sink (its ``close()``, else its ``flush()``), within ``timeout_s`` in all; failures are
    returned, never raised. Then the failures of ``emit_all`` not said yet (a rate's last count) are said: a
    scoring process, the command line and a backfill close their sinks last, and nothing is said after."""
    problems = _each(sinks, ("close", "flush"), "closing", timeout_s)
    for name in {sink_name(sink) for sink in sinks}:
        if (said := _failures.get(name)) is not None:
            said.settle()
    return problems


def register_trace_links(spec: Sequence[Any] | str | None) -> None:
    """Register with trace_context the link lookups of these sinks (names or instances), so that
    the Records captured from now on carry their trace ids. Registering twice is harmless."""
    for sink in sink_list(spec):
        link = sink_trace_link(sink_class(sink) if isinstance(sink, str) else sink)
        if link is not None:
            trace_context.register_link_provider(*link)


def out_of_process(name: Any, sink: Any) -> bool:
    """Whether the sink built from ``name`` may run in a scoring process: it was named (not given as an
    object) and its class says ``out_of_process``."""
    return isinstance(name, str) and getattr(sink, "out_of_process", False) is True


def emit_all(sinks: Sequence[Any], record: Record, scores: list[Score], *, capture_text: bool = True) -> int:
    """Hand one record's Scores to every sink; a sink that fails is logged, never raised. Returns
    how many failed. ``capture_text=False``: the sinks get no text (groundtrace.privacy.without_text)."""
    if not sinks:
        return 0
    if not capture_text:
        record, scores = without_text(record, scores)
    failed = 0
    for sink in sinks:
        try:
            sink.emit(record, scores)
        except Exception as error:
            failed += 1
            name = sink_name(sink)
            said = _failures.get(name)
            if said is None:
                said = _failures.setdefault(name, RateLimitedWarning(log, f"sink {name} failed"))
            said.failed(f"record {record.id}: {type(error).__name__}: {error}")
    return failed


# a sink that keeps failing is said as a rate, one per sink name (a full disk is one line a minute, not 181)
_failures: dict[str, RateLimitedWarning] = {}


T = TypeVar("T")


def retry_with_backoff(
    call: Callable[[], T],
    *,
    attempts: int,
    backoff_s: float,
    retryable: Callable[[Exception], bool],
    before_retry: Callable[[], None] | None = None,
) -> T:
    """``call()``, tried up to ``attempts`` times while its error is ``retryable``, sleeping
    ``backoff_s``, then twice that, and so on between tries. The last error propagates."""
    for attempt in range(max(1, attempts)):
        try:
            return call()
        except Exception as error:
            if attempt + 1 >= attempts or not retryable(error):
                raise
        if before_retry is not None:
            before_retry()
        time.sleep(backoff_s * 2**attempt)
    raise AssertionError("unreachable")


def score_label(score: Score) -> str:
    """A low-cardinality label for trace UIs: 'hallucinated', 'grounded', 'error' or 'unknown'."""
    if score.error is not None:
        return "error"
    if score.hallucinated is None:
        return "unknown"
    return "hallucinated" if score.hallucinated else "grounded"


def spans_summary(score: Score, limit: int = 20) -> list[dict[str, Any]]:
    return [span.model_dump(exclude_none=True) for span in score.spans[:limit]]


__all__ = ["SINK_CALL_TIMEOUT_S", "Sink", "build_sinks", "check_sink", "close_sinks", "emit_all", "flush_sinks", "out_of_process",
           "register_trace_links", "sink_list",
           "retry_with_backoff", "score_label", "sink_class", "sink_name", "sink_names", "sink_trace_link",
           "sink_undeliverable", "spans_summary"]
