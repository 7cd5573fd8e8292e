"""`groundtrace demo`: the entry point `demo` of the group groundtrace.commands (pyproject.toml).

groundtrace's command line loads this module only when the command runs (or --help lists it), so it
imports nothing heavy at the top: the frameworks come in with runner.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from groundtrace.cli import DEMO_METRICS, DemoOutputOption, MetricsOption, console, out, score_examples


def demo_command(
    output: DemoOutputOption = Path("out"),
    metrics: MetricsOption = None,
    examples: Annotated[bool, typer.Option("--examples", help="Only score the bundled example answers (needs no LangChain or LlamaIndex).")] = False,
    mlflow: Annotated[bool | None, typer.Option("--mlflow/--no-mlflow", help="Attach the scores to MLflow traces in a local store under OUTDIR (default: when mlflow is installed).")] = None,
) -> None:
    """Answer bundled questions with a real LangChain chain and LlamaIndex query engine, groundtrace attached, and show the scores."""
    if examples:
        score_examples(output, ",".join(metrics or []))
        return
    from groundtrace_demo.runner import run_demo, show

    names = metrics or DEMO_METRICS.split(",")
    show(run_demo(output, names, mlflow=mlflow, console=console), out)
