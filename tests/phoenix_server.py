"""A real ``phoenix serve`` for the tests: loopback ports, a temp working dir, no telemetry."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    """A loopback port nothing listens on (yet)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def phoenix_serve(workdir: Path, limit_s: float = 120) -> Iterator[str]:
    """Start ``phoenix serve``, yield its URL once healthy, stop it after."""
    pytest.importorskip("phoenix.server.main", reason="the Phoenix server (arize-phoenix) is not installed")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    env.update(PHOENIX_WORKING_DIR=str(workdir), PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(port),
               PHOENIX_GRPC_PORT=str(free_port()), PHOENIX_TELEMETRY_ENABLED="false")
    log_path = workdir / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "-c", "from phoenix.server.main import main; main()", "serve"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, server, log_path, limit_s)
        yield url
    finally:
        stop_process(server)


def stop_process(server: subprocess.Popen) -> None:
    """Terminate a server the test started; kill it if it does not stop."""
    server.terminate()
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=5)


def wait_until_healthy(url: str, server: subprocess.Popen, log_path: Path, limit_s: float, *,
                       health: str = "/healthz", name: str = "phoenix serve") -> None:
    """Wait until ``url + health`` answers 200; fail with the server's log if it exits or stays unhealthy."""
    import httpx

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"{name} exited with {server.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}{health}", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{name} was not healthy after {limit_s:g} s:\n{log_path.read_text()[-3000:]}")
