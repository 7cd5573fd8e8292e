"""Phoenix colours the scores of a named project: an app set up as Phoenix's docs say (``phoenix.otel.register``
with its own ``project_name``, on a Phoenix at a non-default port, OpenInference tracing LangChain) and groundtrace
attached with ``instrument(sinks=["phoenix"])``. The sink runs in the scoring process, where the app's tracer
provider is not: the annotation configs still go to the app's project, not to ``default``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROJECT = "chatllama3"

APP = """
import groundtrace_langchain
from lc_app import rag_chain
from openinference.instrumentation.langchain import LangChainInstrumentor
from phoenix.otel import register

tracer_provider = register(project_name="chatllama3", endpoint="{url}/v1/traces", batch=False, verbose=False)
LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
monitor = groundtrace_langchain.instrument(metrics=["lexical"], sinks=["phoenix"])
for question in ("What is the capital of France?", "When was the Eiffel Tower completed?"):
    rag_chain(answer="Paris was founded on the Moon in 1066.").invoke(question)
assert monitor.flush(90), monitor.stats
print("stats", monitor.stats.sink_errors, monitor.stats.scored)
"""


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


def test_the_annotation_configs_go_to_the_project_the_app_traces_to(tmp_path):
    pytest.importorskip("phoenix.otel")
    pytest.importorskip("openinference.instrumentation.langchain")
    from tests.phoenix_server import phoenix_serve

    with phoenix_serve(tmp_path) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDTRACE_", "PHOENIX_", "OTEL_"))}
        # the sink's one setting: where Phoenix is (the scoring process reads it)
        env.update(PHOENIX_COLLECTOR_ENDPOINT=url, PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", APP.format(url=url)], cwd=HERE, env=env, capture_output=True,
                              text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "stats 0 2" in done.stdout, (done.stdout, done.stderr[-4000:])
        assigned = get(f"{url}/v1/projects/{PROJECT}/annotation_configs")["data"]
        assert [config["name"] for config in assigned] == ["lexical"], assigned
        [config] = assigned
        assert (config["optimization_direction"], config["threshold"]) == ("MAXIMIZE", 0.4), config
        default = get(f"{url}/v1/projects/default/annotation_configs")["data"] if _project_exists(url, "default") else []
        assert default == [], default


def _project_exists(url: str, name: str) -> bool:
    return any(project["name"] == name for project in get(f"{url}/v1/projects")["data"])
