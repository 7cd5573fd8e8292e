"""`groundtrace review` as a user runs it: a real uvicorn process on a free loopback port."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ReviewServer:
    url: str
    process: subprocess.Popen

    def token(self) -> str:
        page = urllib.request.urlopen(self.url + "/", timeout=10).read().decode()
        return json.loads(re.search(r"const TOKEN = (\"[^\"]+\");", page).group(1))


@contextmanager
def review_server(scores: Path, labels: Path) -> Iterator[ReviewServer]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "groundtrace.cli", "review", str(scores), "--labels", str(labels),
                                "--port", str(port), "--no-open"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(f"review exited {process.returncode}: {process.stdout.read().decode()[-2000:]}")
            try:
                urllib.request.urlopen(url + "/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("review did not start in 30 s")
        yield ReviewServer(url, process)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        process.stdout.close()
