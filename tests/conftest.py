from __future__ import annotations

import os

# rich wraps tables to the terminal; tests read whole cells
os.environ.setdefault("COLUMNS", "200")
# a Monitor given no sinks writes to the default store (groundtrace-scores.jsonl in the working
# directory) when none is configured: the tests say none, and those of the default store unset it
os.environ.setdefault("GROUNDTRACE_SINKS", "none")
# the SDKs that report usage home (MLflow 3.x looks up config.mlflow-telemetry.io from a background
# thread) are told not to: the suite reaches nothing beyond this machine
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

from pathlib import Path

import numpy as np
import pytest

from groundtrace.backends.embedders import Embedder

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the property-based tests need the test extra; the rest does not
    settings = None
else:
    # the example database would be written into the working tree; runs stay modest and repeatable
    # (the same examples every run: a failure in CI is a bug, never bad luck)
    settings.register_profile("groundtrace", deadline=None, database=None, print_blob=True, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.load_profile("groundtrace")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_data(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is missing: the tests need the labelled data of ../shared/data")
    return path


class TableEmbedder(Embedder):
    """A backend whose vectors are given by the test, so cosines can be computed by hand."""

    name = "table"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        super().__init__()
        self.vectors = vectors

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class Attempts:
    """Every connection or name lookup to somewhere other than this machine, refused and written down."""

    def __init__(self) -> None:
        self.refused: list[str] = []


@pytest.fixture
def network_guard(monkeypatch):
    """Refuses (and then fails the test for) any connection or name lookup beyond this machine."""
    import socket

    attempts = Attempts()
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(sock: socket.socket, address) -> None:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            attempts.refused.append(f"connect {address[0]}")
            raise ConnectionRefusedError(f"tests may only connect to this machine, not {address[0]}")
        return connect(sock, address)

    def guarded_lookup(host, *args, **kwargs):
        if host not in LOOPBACK and host is not None:
            attempts.refused.append(f"lookup {host}")
            raise socket.gaierror(f"tests may not look up {host}")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    yield attempts
    assert attempts.refused == [], "a test tried to reach the network"


@pytest.fixture(scope="session")
def phoenix_url(tmp_path_factory):
    """One ``phoenix serve`` on loopback for the whole session (it takes 10-30 s to start); each
    test module writes to its own project."""
    from tests.phoenix_server import phoenix_serve

    with phoenix_serve(tmp_path_factory.mktemp("phoenix")) as url:
        yield url
