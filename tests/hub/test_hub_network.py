"""A Hub model that is not cached, with the Hub out of reach: one error within seconds that names the network
and the fixes that need none, not a minute of retries that ends by blaming the model; a Hub that answers
that it has no such model says that instead. The Hub here is a closed or a scripted port on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from groundtrace._extras import HubUnreachableError, ModelUnavailableError
from groundtrace.backends.hub_models import forget_models, load_failure
from groundtrace.metrics import get_metric
from groundtrace.monitor import Monitor
from groundtrace.record import Record
from tests.hub.test_hub_commands import GUARD, MISSING, ROWS
from tests.test_monitor import Collect


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once, as with no network."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HubStub:
    """A Hub on 127.0.0.1 that answers every request with one status and the Hub's X-Error-Code header."""

    def __init__(self, status: int, error_code: str | None) -> None:
        self.paths: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's name
                stub.paths.append(f"{self.command} {self.path}")
                self.send_response(status)
                if error_code:
                    self.send_header("X-Error-Code", error_code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> HubStub:
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def answers(tmp_path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text('{"id": "a", "question": "Q?", "contexts": ["Paris is in France."], "answer": "Paris is in France."}\n')
    return path


def run_score(tmp_path: Path, answers: Path, metric: str, endpoint: str) -> tuple[subprocess.CompletedProcess, float]:
    """`groundtrace score` as a user runs it, with HF_ENDPOINT as huggingface_hub reads it, an empty cache and
    every connection to somewhere other than this machine written down (and refused)."""
    (tmp_path / "sitecustomize.py").write_text(GUARD)
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update({"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(tmp_path / "hub-cache"), "NETWORK_LOG": str(tmp_path / "net.log"),
                "COLUMNS": "400", "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])})
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "score", str(answers), "-m", metric,
                           "-O", f"{metric}.model={MISSING}"], env=env, capture_output=True, text=True, timeout=120)
    assert not (tmp_path / "net.log").exists(), (tmp_path / "net.log").read_text()
    return done, time.perf_counter() - started


@pytest.mark.parametrize("metric", ["nli", "lettuce"])
def test_without_network_the_command_line_names_the_network_within_seconds(tmp_path, answers, metric) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    done, took = run_score(tmp_path, answers, metric, endpoint)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0] == (
        f"error: cannot reach the Hugging Face Hub ({endpoint}) to fetch model '{MISSING}' (no network: ConnectError: "
        f"[Errno 111] Connection refused): set HF_HUB_OFFLINE=1 to use the models in the local cache "
        f"({tmp_path / 'hub-cache'}), or pass a folder holding the model: model=/path/to/model (on the command line "
        f"-O {metric}.model=/path/to/model)")
    assert took < 10, took  # one refused connection, no retries


def test_a_hub_without_the_model_says_the_model_was_not_found(tmp_path, answers) -> None:
    with HubStub(404, "RepoNotFound") as hub:
        done, took = run_score(tmp_path, answers, "nli", hub.url)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0] == (
        f"error: model '{MISSING}' was not found on the Hugging Face Hub ({hub.url}): check its id (owner/name), "
        "log in (`hf auth login`, or set HF_TOKEN) if it is private, or set model= to a folder holding the model")
    # asked once, no retries (huggingface_hub may also GET an /api/ path of its own)
    assert [path for path in hub.paths if "config.json" in path] == [f"HEAD /{MISSING}/resolve/main/config.json"]
    assert took < 10, took


@pytest.fixture
def hub_at(monkeypatch, tmp_path) -> Iterator[Callable[[str], None]]:
    """Point this process's huggingface_hub at ``url`` (where it reads HF_ENDPOINT), with an empty cache."""
    from huggingface_hub import constants

    def point(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    forget_models()
    yield point
    forget_models()


def test_the_error_is_permanent_and_every_record_of_a_monitor_gets_it_at_once(hub_at) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    hub_at(endpoint)
    with pytest.raises(HubUnreachableError) as caught:
        get_metric("nli", model=MISSING).preflight()
    assert isinstance(caught.value, ModelUnavailableError) and caught.value.retryable is False
    sink = Collect()
    started = time.perf_counter()
    with Monitor(["nli"], [sink], isolation="thread", flush_at_exit=False, options={"nli": {"model": MISSING}}) as monitor:
        for row in ROWS:
            assert monitor.submit(Record.model_validate(row))
        assert monitor.flush(timeout=30)
    errors = [scores[0].error for _, scores in sink.rows]
    # the Monitor names the metric that cannot load, then gives the loader's own reason whole
    assert len(errors) == 3 and all(e.startswith(f"metric nli cannot load: {caught.value}") for e in errors), errors
    assert time.perf_counter() - started < 10


def test_a_hub_that_answers_503_is_the_network_too(hub_at) -> None:
    with HubStub(503, None) as hub:
        hub_at(hub.url)
        with pytest.raises(HubUnreachableError, match=r"\(the Hub answered HTTP 503\): set HF_HUB_OFFLINE=1"):
            get_metric("lettuce", model=MISSING).preflight()
    assert [path for path in hub.paths if "config.json" in path] == [f"HEAD /{MISSING}/resolve/main/config.json"]


def test_a_download_cut_off_midway_blames_the_network_not_the_model() -> None:
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as reset:
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files") from reset
    except OSError as error:
        failure = load_failure(MISSING, error, "nli")
    assert isinstance(failure, HubUnreachableError)
    assert f"to fetch model '{MISSING}' (no network: ConnectionResetError: [Errno 104] Connection reset by peer)" in str(failure)
    broken = load_failure(MISSING, ValueError("Unrecognized model in /tmp/x"), "nli")
    assert type(broken) is ModelUnavailableError and "could not be loaded (ValueError: Unrecognized model" in str(broken)
