"""The directory where the processes of one server keep their series for the one scrape (see
groundtrace.telemetry.scrape), in prometheus_client's multiprocess format.

A *group* is the processes that serve the Monitor's metrics on one port in one process group (a server and its
workers: gunicorn's master and workers, uvicorn's supervisor and workers, a fork pool and its parent). Its
directory is PROMETHEUS_MULTIPROC_DIR when set, else ``{tempdir}/groundtrace-prometheus-{uid}/{pgid}-{port}``.
In it:

- ``groundtrace_member_{port}_{pid}``: each process of the group, written before it tries to listen, so one that
  finds the port held knows whether a process of its own group holds it;
- ``counter_{pid}.db``, ``histogram_{pid}.db``, ``gauge_liveall_{pid}.db``: each process's series, written by
  :meth:`Group.write` as prometheus_client's own metrics write them (``mmap_dict``), read back summed by its
  ``MultiProcessCollector``. Counters and histograms of a dead process stay (a total never goes back down);
  its gauges are removed with ``mark_process_dead``, as prometheus_client documents for a dead worker.

A directory of groundtrace's own is emptied of dead processes' files when a process opens the endpoint with no
other live member (a new run on the same port), and removed by the last member to close; the user's
PROMETHEUS_MULTIPROC_DIR is never emptied (prometheus_client: empty it before the server starts).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: the file of each kind of series: a gauge per process (a pid label), summed by the queries that want a total
FILE_OF = {"counter": "counter", "histogram": "histogram", "gauge": "gauge_liveall"}
_DB = re.compile(r"^(?:counter|histogram|gauge_[a-z]+|summary)_(\d+)\.db$")
_MEMBER = re.compile(r"^groundtrace_member_(\d+)_(\d+)$")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (ended, its parent has not reaped it yet) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def base_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"groundtrace-prometheus-{os.getuid()}"


class Group:
    """This process's place in its group's directory. ``own``: the directory is groundtrace's (not the user's)."""

    def __init__(self, path: Path, port: int, own: bool) -> None:
        self.path, self.port, self.own = path, port, own
        self.pid = os.getpid()
        self._files: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: what this process held when it was forked (its parent's counts): left out of what it writes
        self.baseline: dict[str, float] = {}
        self._gauges_written = False

    @classmethod
    def for_port(cls, port: int, multiproc_dir: str | None) -> Group | None:
        """The group of ``port`` (None when its directory cannot be had: a temp directory not ours)."""
        if multiproc_dir:
            path = Path(multiproc_dir)
            path.mkdir(parents=True, exist_ok=True)
            return cls(path, port, own=False)
        base = base_dir()
        base.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(base)
        if info.st_uid != os.getuid() or not os.path.isdir(base) or os.path.islink(base):
            return None  # another user's (or a link): their files must not become our series
        path = base / f"{os.getpgid(0)}-{port}"
        path.mkdir(mode=0o700, exist_ok=True)
        return cls(path, port, own=True)

    # ------------------------------------------------------------------------------------ members
    def _member(self, pid: int) -> Path:
        return self.path / f"groundtrace_member_{self.port}_{pid}"

    def announce(self) -> None:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._member(self.pid).touch()

    def members(self) -> list[int]:
        found = (_MEMBER.match(name) for name in self._names())
        return [int(m.group(2)) for m in found if m and int(m.group(1)) == self.port]

    def others(self) -> bool:
        """Whether another process is (or was) of this group: a live member, or a process's series."""
        return any(pid != self.pid and alive(pid) for pid in self.members()) or \
            any(pid != self.pid for pid in self._series_pids())

    def live_sibling(self) -> bool:
        return any(pid != self.pid and alive(pid) for pid in self.members())

    def _names(self) -> list[str]:
        try:
            return os.listdir(self.path)
        except OSError:
            return []

    def _series_pids(self) -> set[int]:
        return {int(m.group(1)) for m in map(_DB.match, self._names()) if m}

    def fresh_start(self) -> None:
        """This process opened the endpoint: with no other live member, what the directory holds is an earlier
        run's (its processes all dead): their files go, and the directories of process groups that ended."""
        if not self.own or self.live_sibling():
            return
        for name in self._names():
            match = _DB.match(name) or _MEMBER.match(name)
            if match and int(match.groups()[-1]) != self.pid:
                with contextlib.suppress(OSError):
                    os.remove(self.path / name)
        for other in base_dir().iterdir():
            pgid = other.name.partition("-")[0]
            if other != self.path and pgid.isdigit() and not _group_alive(int(pgid)):
                shutil.rmtree(other, ignore_errors=True)

    def sweep(self) -> None:
        """The gauges of dead processes go (prometheus_client's mark_process_dead); their counters stay."""
        from prometheus_client.multiprocess import mark_process_dead

        for pid in self._series_pids() | set(self.members()):
            if pid != self.pid and not alive(pid):
                mark_process_dead(pid, str(self.path))
                with contextlib.suppress(OSError):
                    os.remove(self._member(pid))

    def leave(self) -> None:
        """This process's endpoint closed: its member file goes, and the directory with the last member."""
        with self._lock:
            self._close_files()
        with contextlib.suppress(OSError):
            os.remove(self._member(self.pid))
        if self.own and not self.live_sibling():
            shutil.rmtree(self.path, ignore_errors=True)

    def after_fork_in_child(self) -> None:
        """A forked child: its own pid, files and lock; the parent's files stay the parent's."""
        self.pid = os.getpid()
        self._files = {}
        self._lock = threading.Lock()
        self._gauges_written = False
        self.announce()

    # ------------------------------------------------------------------------------------ series
    def write(self, families: Iterable[Any], gauges: bool = True) -> None:
        """This process's series as prometheus_client's metrics write them: counters and histograms less the
        baseline, histogram buckets one by one (the collector adds them up), gauges only when ``gauges``."""
        from prometheus_client.mmap_dict import mmap_key

        now = time.time()
        with self._lock:
            for family in families:
                kind = FILE_OF.get(family.type)
                if kind is None or kind.startswith("gauge") and not gauges:
                    continue  # target_info: the serving process's own; an idle parent's gauges
                db = self._file(kind)
                for name, labels, value in _file_samples(family):
                    key = mmap_key(family.name, name, list(labels), list(labels.values()), family.documentation)
                    if kind == "histogram":
                        value -= self.baseline.get(key, 0.0)
                    db.write_value(key, value, now)
                self._gauges_written |= kind == "gauge_liveall"
            if not gauges and self._gauges_written:
                self._close_files("gauge_liveall")
                with contextlib.suppress(OSError):
                    os.remove(self.path / f"gauge_liveall_{self.pid}.db")
                self._gauges_written = False

    def histograms(self, families: Iterable[Any]) -> dict[str, float]:
        """Each histogram value of ``families`` by its key: a forked child's baseline. The SDK's histograms carry
        what the parent recorded into the child; the counters start at 0 there (the Monitor's counts start anew)."""
        from prometheus_client.mmap_dict import mmap_key

        return {mmap_key(family.name, name, list(labels), list(labels.values()), family.documentation): value
                for family in families if family.type == "histogram" for name, labels, value in _file_samples(family)}

    def _file(self, kind: str) -> Any:
        from prometheus_client.mmap_dict import MmapedDict

        if kind not in self._files:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._files[kind] = MmapedDict(str(self.path / f"{kind}_{self.pid}.db"))
        return self._files[kind]

    def _close_files(self, *kinds: str) -> None:
        for kind in kinds or list(self._files):
            db = self._files.pop(kind, None)
            if db is not None:
                db.close()


def _file_samples(family: Any) -> list[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) as a multiprocess file holds them: a counter's totals (no _created); a
    histogram's _sum and each bucket's own count, not the cumulative one the exposition shows (the collector
    adds them up again, and derives _count)."""
    if family.type == "counter":
        return [(s.name, s.labels, s.value) for s in family.samples if not s.name.endswith("_created")]
    if family.type == "gauge":
        return [(s.name, s.labels, s.value) for s in family.samples]
    samples: list[tuple[str, dict[str, str], float]] = []
    cumulative: dict[tuple[tuple[str, str], ...], list[tuple[float, str, float]]] = {}
    for s in family.samples:
        if s.name.endswith("_bucket"):
            rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            cumulative.setdefault(rest, []).append((float(s.labels["le"]), s.labels["le"], s.value))
        elif s.name.endswith("_sum"):
            samples.append((s.name, s.labels, s.value))
    for rest, buckets in cumulative.items():
        below = 0.0
        for _, le, count in sorted(buckets):
            samples.append((f"{family.name}_bucket", {**dict(rest), "le": le}, count - below))
            below = count
    return samples
