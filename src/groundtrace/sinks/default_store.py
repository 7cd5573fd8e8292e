"""Never silent: the sinks of live capture when none is configured, and the lines that say where the scores went.

One decision, here: a Monitor given no sinks (``sinks=None``) takes the configuration's
(``GROUNDTRACE_SINKS``); when that is unset too, the scores go to the default store, the jsonl sink at
:attr:`Settings.store_path <groundtrace.config.Settings.store_path>` (GROUNDTRACE_JSONL_PATH, else
groundtrace-scores.jsonl in the working directory). ``none`` (``sinks="none"``,
``GROUNDTRACE_SINKS=none``) or an empty list means no sink, and silence: benchmarks and tests use it.

The Monitor says where the default store is once per process, at the first record that reaches it
(:func:`announce`), and, at close, how many answers went there (:func:`summary`), both through the
``groundtrace`` logger at WARNING: they show with no logging configured, and can be silenced.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundtrace.config import Settings
from groundtrace.redaction import get_logger

log = get_logger("groundtrace.sinks")

_announced: set[Path] = set()
_lock = threading.Lock()


def live_sinks(spec: Sequence[Any] | str | None, settings: Settings | None = None) -> tuple[list[Any], Path | None]:
    """The sinks (names and objects) a live Monitor builds from ``spec``, and the default store's path
    when that is where its scores go (None otherwise). ``settings``: the configuration asked when
    ``spec`` is None (default: the environment's)."""
    from groundtrace.sinks import sink_list

    if spec is None:
        configured = (settings if settings is not None else Settings.from_env())
        if configured.sinks is None:
            path = configured.store_path
            return [f"jsonl:{path}"], path
        spec = configured.sinks
    names = sink_list(spec)
    if len(names) == 1 and isinstance(names[0], str) and names[0].strip().lower() == "none":
        return [], None
    return names, None


def announce(path: Path) -> None:
    """Say once per process (per path) where the scores go and how to look at them."""
    if path in _announced:  # every record after the first one: a set lookup, no lock
        return
    with _lock:
        if path in _announced:
            return
        _announced.add(path)
    log.warning(
        "groundtrace: no sink configured, so scores go to %s\n"
        "  watch them:  groundtrace watch %s\n"
        "  report:      groundtrace report %s\n"
        "  on your traces instead: sinks=[\"otel\"] or GROUNDTRACE_SINKS=otel (also langsmith, mlflow, phoenix, "
        "langfuse)", path, path, path)


def summary(path: Path, answers: int, failed: int, flagged: int, flagged_by: Mapping[str, int],
            no_record: Mapping[str, int] | None = None) -> str:
    """The line said when a Monitor that wrote to the default store closes: ``answers`` that reached it,
    ``failed`` of them with an error Score, ``flagged`` by at least one metric (``flagged_by``: per metric),
    and the turns that made no record (``no_record``: per reason), with where to look."""
    said = f"groundtrace: {answers} answer{'' if answers == 1 else 's'} scored, {flagged} flagged"
    metrics = [(name, count) for name, count in flagged_by.items() if count]
    if metrics:
        said += " (" + ", ".join(name if len(metrics) == 1 else f"{name} {count}" for name, count in metrics) + ")"
    if failed:
        said += f", {failed} failed"
    said = f"{said}; scores in {path}"
    return f"{said}\n{unrecorded(no_record)}" if no_record else said


# where a user who sees fewer scores than answers looks first
NO_SCORES_DOCS = "docs: troubleshooting, 'I see no scores'"


def unrecorded(no_record: Mapping[str, int]) -> str:
    """The line that counts the turns that made no record, per reason, and says how to find out why."""
    turns = sum(no_record.values())
    reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(no_record.items(), key=lambda kv: -kv[1]))
    return (f"groundtrace: {turns} turn{'' if turns == 1 else 's'} made no record ({reasons}); the integration's "
            f"stats() says why (handler.stats(), groundtrace_llamaindex.stats()), and @groundtrace.retrieval marks "
            f"retrieval groundtrace cannot see ({NO_SCORES_DOCS})")


def forget_announcements() -> None:
    """Say it again in this process (tests)."""
    with _lock:
        _announced.clear()
