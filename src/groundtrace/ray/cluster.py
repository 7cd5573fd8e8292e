"""Where the Ray cluster is: import Ray (or say which extra installs it) and connect to it once."""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

from groundtrace._extras import missing_extra

LOCAL = ("", "local")


def import_ray(what: str) -> Any:
    try:
        import ray
    except ImportError as error:
        raise missing_extra("ray", what, error) from None
    return ray


def connect(address: str | None, what: str = "the ray engine") -> Any:
    """The ``ray`` module, connected: to the cluster this process already joined, else to ``address``.

    ``None`` or "local": start a local cluster sized to this machine. "auto": the cluster that
    ``ray start --head`` runs on this machine. "HOST:PORT" or "ray://HOST:PORT": that cluster's head
    (GCS port 6379, or Ray Client port 10001)."""
    ray = import_ray(what)
    if ray.is_initialized():
        return ray
    if address is None or address.strip().lower() in LOCAL:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    else:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
    return ray


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail in seconds, not in a minute of Ray's own retries, when nothing listens at HOST:PORT."""
    if address.strip().lower() == "auto":
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    if not parts.hostname or not parts.port:
        raise ValueError(f"Ray address {address!r} is not 'auto', 'local', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=timeout_s).close()
    except OSError as error:
        raise ConnectionError(f"no Ray cluster answers at {address} ({error}); start one with `ray start --head` "
                              "or pass the head's address (HOST:6379, or ray://HOST:10001)") from None
