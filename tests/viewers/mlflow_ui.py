"""The real MLflow UI for a test: ``mlflow server`` from a virtual environment of its own (the full mlflow, which
pins graphene<4 against the Phoenix server in .venv; scripts/mlflow_ui_venv.sh makes it), over the sqlite store
the test wrote with .venv's mlflow-skinny, on a loopback port; stopped, with everything it started, after."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from tests.phoenix_server import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[2]
#: where scripts/mlflow_ui_venv.sh puts it; GROUNDTRACE_MLFLOW_UI_VENV names another
VENV = Path(os.environ.get("GROUNDTRACE_MLFLOW_UI_VENV", ROOT / ".cache" / "mlflow-ui"))
MAKE_IT = "scripts/mlflow_ui_venv.sh"


def skinny_version() -> str | None:
    for name in ("mlflow-skinny", "mlflow"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def missing() -> str | None:
    """Why the MLflow UI cannot run here (None when it can): no venv, or one of another MLflow version than the
    store's writer (another version may expect another schema)."""
    if not (VENV / "bin" / "mlflow").exists():
        return f"the MLflow UI needs its own venv with the full mlflow: run {MAKE_IT} (it makes {VENV})"
    wanted = skinny_version()
    if wanted is None:
        return "the test writes its MLflow store with mlflow-skinny, which is not installed"
    if not (VENV / f".mlflow-{wanted}").exists():
        made = sorted(p.name.removeprefix(".mlflow-") for p in VENV.glob(".mlflow-*")) or ["an unknown version"]
        return (f"{VENV} has mlflow {', '.join(made)}, the store is written by mlflow-skinny {wanted}: "
                f"run {MAKE_IT} again")
    return None


@contextmanager
def mlflow_ui(database: Path, limit_s: float = 90) -> Iterator[str]:
    """``mlflow server`` over the sqlite ``database``; yields its URL once healthy."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    workdir = database.parent
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    # nothing reports home; no job runner (seven huey consumers the UI's pages never need)
    env.update(MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    command = [str(VENV / "bin" / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{database}",
               "--default-artifact-root", (workdir / "ui-artifacts").as_uri(),
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    log_path = workdir / "mlflow-ui.log"
    with open(log_path, "wb") as log:
        # a session of its own: the server's workers and job runners stop with it
        server = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        # e.g. "Detected out-of-date database schema" in the log: the store and the server are of other MLflow versions
        wait_until_healthy(url, server, log_path, limit_s, health="/health", name="mlflow server")
        yield url
    finally:
        stop_group(server)


def stop_group(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (only what it started), SIGKILL if it is still there."""
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # workers of a stopped server that outlived it
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
