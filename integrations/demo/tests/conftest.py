from __future__ import annotations

import os
import sys
from pathlib import Path

# rich wraps to the terminal, and the demo's subprocess inherits this: the tests read whole lines
os.environ.setdefault("COLUMNS", "200")
# a Monitor given no sinks writes to the default store (groundtrace-scores.jsonl in the working
# directory) when none is configured: the tests say none, and those of the default store unset it
os.environ.setdefault("GROUNDTRACE_SINKS", "none")
# SDKs that report usage home (MLflow 3.x) are told not to: the suite reaches nothing beyond this machine
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

# tests/loopback.py of the groundtrace checkout (the scripted local LLM server), however pytest is run
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
