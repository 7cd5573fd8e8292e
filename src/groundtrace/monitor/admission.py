"""What the Monitor takes: sampling by trace, exclusion by metadata, the isolation it runs in, record sizes.

Pure functions of their arguments, so ``Monitor.submit`` can decide in O(1) without a lock.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from groundtrace.record import PendingRecord, Record

#: the bytes of text the queue may hold (records are sized once it holds QUEUE_SIZED_FROM or more)
DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
QUEUE_SIZED_FROM = 8


def record_size(record: Record | PendingRecord) -> int:
    """The characters of text a record holds (a Record's fields; a PendingRecord's own estimate): lengths only."""
    if isinstance(record, PendingRecord):
        return record.size_hint()
    return len(record.question or "") + len(record.answer or "") + sum(map(len, record.contexts or ()))


# Metadata keys that keep a record out of scoring (set per call, e.g. in a chain's run metadata).
EXCLUDE_KEYS = ("groundtrace_exclude", "groundtrace.exclude")


ISOLATIONS = ("auto", "process", "thread", "ray")


def choose_isolation(requested: str, metrics: Any, ray_address: str | None = None) -> str:
    if requested not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {', '.join(map(repr, ISOLATIONS))}, got {requested!r}")
    names_only = metrics is None or isinstance(metrics, str) or all(isinstance(m, str) for m in metrics)
    if requested in ("process", "ray") and not names_only:
        raise ValueError(f"isolation={requested!r} needs metrics given by name (instances cannot move to another process)")
    if requested == "auto" and ray_address:
        return "ray" if names_only else "thread"
    if requested == "auto":
        return "process" if names_only and os.name == "posix" else "thread"
    return requested


def check_sample_rate(rate: float) -> None:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"sample_rate must lie in [0, 1], got {rate}")


def sampled(key: str, rate: float) -> bool:
    """Deterministic sampling: the same key (a trace id) is always in or always out."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < rate
