"""The judge's answer cache on disk: one sqlite file keyed by (base URL, model, messages, params,
requested schema).

Kept as our own ~40 lines of sqlite3 rather than diskcache: the standard library does it, the file
stays one inspectable table, and the core gains no dependency.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundtrace.config import JudgeSettings


def default_cache_dir() -> Path:
    """The environment's cache folder (``groundtrace.config.JudgeSettings.cache_dir``)."""
    return JudgeSettings.from_env().cache_dir


class JudgeCache:
    """Judge answers in ``DIR/judge.sqlite3``: one connection guarded by a lock (safe across
    threads), WAL journaling and a busy timeout (tolerable across processes)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / "judge.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")

    @staticmethod
    def key(parts: Mapping[str, Any]) -> str:
        canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, value, created) VALUES (?, ?, ?)", (key, json.dumps(value), time.time())
            )

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM answers")

    def close(self) -> None:
        with self._lock:
            self._db.close()


__all__ = ["JudgeCache", "default_cache_dir"]
