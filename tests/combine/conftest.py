"""The scripted metrics of scripted.py, registered for a test (the metric registry is the process's)."""

import pytest

import groundtrace.metrics as metrics_registry

from .scripted import ScriptedJudge, SpanMaker


@pytest.fixture
def scripted_metrics(monkeypatch):
    """ScriptedJudge and SpanMaker, registered for this test only."""
    for cls in (ScriptedJudge, SpanMaker):
        monkeypatch.setitem(metrics_registry._registered, cls.name, cls)
    ScriptedJudge.calls = []


