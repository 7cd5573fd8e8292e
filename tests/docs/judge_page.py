"""A scripted OpenAI-compatible judge for the docs' judge-metric pages (docs/metrics/*.md).

A page starts it from an invisible block: ``judge, __cleanup__ = start_judge({...})``. The judge answers each
step (the schema a metric asks for: "Statements", "Verdicts", ...) from the script, as tests/judge/scripted.py
does; OPENAI_BASE_URL points at it and the judge cache goes to the page's folder, so the page's visible code is
what a user writes against a real endpoint. ``__cleanup__`` stops the server and restores the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.judge.scripted import ScriptedJudge

_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GROUNDTRACE_JUDGE_CACHE_DIR")


def start_judge(script: Mapping[str, Any], env: dict[str, str] | None = None) -> tuple[ScriptedJudge, Callable[[], None]]:
    """Start the judge; ``env`` (the page's ``__snippet_env__``) gets the same variables for its bash blocks."""
    judge = ScriptedJudge(script)
    judge.__enter__()
    saved = {name: os.environ.get(name) for name in _VARIABLES}
    values = {"OPENAI_BASE_URL": judge.url, "OPENAI_API_KEY": "sk-docs",
              "GROUNDTRACE_JUDGE_CACHE_DIR": str(Path.cwd() / "judge-cache")}
    os.environ.update(values)
    if env is not None:
        env.update(values)

    def cleanup() -> None:
        judge.__exit__(None, None, None)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return judge, cleanup
