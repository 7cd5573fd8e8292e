"""Issue 54, row 1: records submitted in the workers of a process pool are scored whatever its start method. A
worker started by forkserver (Python 3.14's default on Linux) imports the application before it is a worker and
ends with os._exit: its Monitor's exit hook is put in place when it starts its work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent("""
    import multiprocessing, sys
    from concurrent.futures import ProcessPoolExecutor

    from tests.faults import pool_app

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        with ProcessPoolExecutor(2, mp_context=context) as pool:
            print(len(set(pool.map(pool_app.answer, range(20)))))
""")


@pytest.mark.parametrize("method", ["forkserver", "spawn", "fork"])
def test_every_record_of_a_pools_workers_is_scored(tmp_path, method):
    out, script = tmp_path / "scores.jsonl", tmp_path / "app.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "POOL_APP_OUT": str(out), "PYTHONPATH": str(ROOT), "GROUNDTRACE_SINKS": ""}
    done = subprocess.run([sys.executable, str(script), method], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # the parent imports the app too (its Monitor scores nothing); each worker's records are all written
    assert sorted(line["id"] for line in lines) == sorted(f"r{i}" for i in range(20)), done.stderr[-3000:]
    assert all(line["scores"][0]["metric"] == "lexical" and line["scores"][0]["error"] is None for line in lines)
