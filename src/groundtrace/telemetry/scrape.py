"""The Monitor's scrape endpoint: one per process and address, and one scrape for all the processes of a server.

A prefork server (gunicorn sync or gthread, ``--preload`` or not, uvicorn ``--workers N``, a fork pool) runs a
Monitor in each process, and only one of them can listen on the port. The processes that name the same port in
one process group are a *group* (groundtrace.telemetry.multiprocess keeps its directory):

- each announces itself in the group's directory, then tries to listen; the one that listens serves; one that
  finds the port held by a live member of its group joins instead of failing (anyone else holding the port is
  a setting to change, said as before);
- a lone process serves prometheus_client's default registry as it always did. Once the group has another
  process (a member, a child forked with the Monitor built) or PROMETHEUS_MULTIPROC_DIR is set, every process
  writes its series into the directory every :data:`WRITE_S` seconds, and a scrape gets prometheus_client's
  MultiProcessCollector over it: counters and histograms summed over the processes (dead ones included),
  gauges per process (a ``pid`` label; a dead process's removed at the next scrape), and the serving process's
  ``target_info``;
- a process that forked its Monitor into workers and was offered no record itself (gunicorn ``--preload``'s
  master) writes no gauges: its idle threads would pass for a live worker with nothing queued;
- when the serving process ends, a member listens in its place at its next write (within WRITE_S).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

from groundtrace.redaction import get_logger
from groundtrace.telemetry.multiprocess import Group

log = get_logger("groundtrace.telemetry")

#: seconds between a process's writes of its series (a scrape shows what each process had this long ago at most)
WRITE_S = 1.0


class Endpoint:
    """The scrape endpoint on ``host:port`` as this process has it: serving (``server`` set) or a member of the
    group whose endpoint another process serves. ``users``: the Monitors using it."""

    def __init__(self, host: str, port: int, group: Group | None, multiproc_dir: str | None) -> None:
        self.host, self.port, self.group = host, port, group
        self.multiproc_dir = multiproc_dir
        self.server: Any = None
        self.thread: Any = None
        self.users = 0
        #: this process forked children with the endpoint open: they are of its group
        self.forked = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._failed = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def listen(self) -> None:
        """Serve here (raises OSError where the address cannot be had)."""
        from prometheus_client import CollectorRegistry

        from groundtrace.telemetry.endpoint import serve

        registry = CollectorRegistry()
        registry.register(_Scrape(self))
        self.server, self.thread, _ = serve(self.host, self.port, registry)
        self.port = self.server.server_address[1]

    # -------------------------------------------------------------------------- the group's series
    def shared(self) -> bool:
        """Whether a scrape is the group's sum (else this process's own registry)."""
        group = self.group
        return group is not None and (not group.own or self.forked or group.others())

    def write(self, families: list[Any] | None = None) -> list[Any]:
        from groundtrace.telemetry.providers import own_families, recorded

        families = own_families() if families is None else families
        if self.group is not None:
            self.group.write(families, gauges=not (self.forked and not recorded()))
        return families

    def start(self) -> None:
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="groundtrace-metrics-writer", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(WRITE_S):
            try:
                if self.server is None and self.group is not None:
                    self._take_over()
                if self.shared():
                    self.write()
            except Exception as error:  # the next tick tries again; said once
                if not self._failed:
                    self._failed = True
                    log.warning("groundtrace: writing this process's metrics for the shared scrape failed: %s", error)

    def _take_over(self) -> None:
        try:
            self.listen()
        except OSError:
            return  # still served by another process of the group
        log.info("groundtrace: Prometheus endpoint at %s, taken over from a process of this server that ended", self.url)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=WRITE_S + 5.0)
        if self.group is not None:
            try:
                if self.shared():
                    self.write()  # the counts up to the Monitor's close, kept for the scrape
            except Exception:
                pass
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=5.0)
        if self.group is not None:
            self.group.leave()

    # ------------------------------------------------------------------------------------- forks
    def before_fork(self) -> None:
        """In the parent, before a fork: what the SDK's histograms hold, which the child would count again."""
        from groundtrace.telemetry.providers import own_families, recorded

        if self.group is not None:
            self.group.baseline = self.group.histograms(own_families()) if recorded() else {}

    def after_fork_in_parent(self) -> None:
        self.forked = True
        if self.group is not None:
            self.group.baseline = {}

    def after_fork_in_child(self) -> None:
        """A child forked with the endpoint open is a member of the group: the listening socket stays the
        parent's (the child's copy is closed; shutdown() would stop the parent's), the child writes its own."""
        if self.server is not None:
            self.server.socket.close()
        self.server = self.thread = None
        self.forked, self._failed = False, False
        if self.group is None:
            return
        self.group.after_fork_in_child()
        self.start()


class _Scrape:
    """What the endpoint answers a scrape with: this process's registry, or the group's sum."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def collect(self) -> Iterator[Any]:
        from prometheus_client import REGISTRY

        endpoint, group = self.endpoint, self.endpoint.group
        if group is None or not endpoint.shared():
            yield from REGISTRY.collect()
            return
        from prometheus_client.multiprocess import MultiProcessCollector

        families = endpoint.write()  # this process's own, as of now
        group.sweep()
        yield from MultiProcessCollector(None, path=str(group.path)).collect()
        yield from (family for family in families if family.type == "info")  # target_info


_endpoints: dict[tuple[str, int], Endpoint] = {}
_lock = threading.Lock()
_fork_hooks = False


def open_endpoint(host: str, port: int, multiproc_dir: str | None = None) -> Endpoint:
    """The scrape endpoint on ``host:port`` (port 0: a free port, given in the answer), opened on first use;
    each open_endpoint() is matched by one close_endpoint(). ``multiproc_dir``: PROMETHEUS_MULTIPROC_DIR."""
    global _fork_hooks
    with _lock:
        endpoint = _endpoints.get((host, port)) if port else None
        if endpoint is None:
            endpoint = _open(host, port, multiproc_dir)
            _endpoints[(host, endpoint.port)] = endpoint
            if not _fork_hooks and hasattr(os, "register_at_fork"):
                os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                                    after_in_child=_after_fork_in_child)
                _fork_hooks = True
        endpoint.users += 1
        return endpoint


def _group(port: int, multiproc_dir: str | None) -> Group | None:
    if os.name != "posix":  # no process groups, no fork: each process serves its own
        return None
    try:
        return Group.for_port(port, multiproc_dir)
    except OSError as error:  # no directory to share: this process serves its own series, as a lone one does
        log.warning("groundtrace: no directory for the processes of this server to share their metrics in (%s): "
                    "a scrape shows the serving process's only", error)
        return None


def _open(host: str, port: int, multiproc_dir: str | None) -> Endpoint:
    group = _group(port, multiproc_dir) if port else None
    if group is not None:
        group.announce()  # before listening: a process of the group that finds the port held knows who holds it
    endpoint = Endpoint(host, port, group, multiproc_dir)
    try:
        endpoint.listen()
    except OSError as error:
        if group is None or not group.live_sibling():  # a port in use, an address not of this machine: a setting
            if group is not None:
                group.leave()
            raise OSError(f"the Prometheus endpoint cannot listen on {host}:{port}: {error}; name another "
                          "with telemetry='prometheus:HOST:PORT' or OTEL_EXPORTER_PROMETHEUS_HOST/_PORT") from error
        log.info("groundtrace: Prometheus endpoint at %s, served by another process of this server; this "
                 "process's series are summed into it", endpoint.url)
    else:
        if group is None and port == 0:  # a free port: the group is the one of the port it got
            endpoint.group = group = _group(endpoint.port, multiproc_dir)
            if group is not None:
                group.announce()
        if group is not None:
            group.fresh_start()
        log.info("groundtrace: Prometheus endpoint at %s", endpoint.url)
    endpoint.start()
    return endpoint


def close_endpoint(endpoint: Endpoint) -> None:
    with _lock:
        endpoint.users -= 1
        if endpoint.users > 0:
            return
        if _endpoints.get((endpoint.host, endpoint.port)) is endpoint:
            del _endpoints[(endpoint.host, endpoint.port)]
    endpoint.close()


def _before_fork() -> None:
    for endpoint in list(_endpoints.values()):
        try:
            endpoint.before_fork()
        except Exception:
            pass


def _after_fork_in_parent() -> None:
    for endpoint in list(_endpoints.values()):
        endpoint.after_fork_in_parent()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # it may have been held by another thread of the parent
    for endpoint in list(_endpoints.values()):
        try:
            endpoint.after_fork_in_child()
        except Exception as error:
            log.warning("groundtrace: this forked process's metrics are not on the shared scrape: %s", error)
