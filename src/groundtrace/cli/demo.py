"""The bundled example answers, scored (what `groundtrace demo --examples` shows), and the placeholder `groundtrace
demo` where groundtrace-demo is not installed."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from groundtrace.cli.common import MetricsOption, console, out, records_table, summary_table
from groundtrace.cli.score import score_file
from groundtrace.score import ScoredRecord


def example_path() -> Path:
    return Path(str(resources.files("groundtrace") / "examples" / "answers.jsonl"))


DemoOutputOption = Annotated[
    Path, typer.Option("--output", "-o", help="Folder for scores.jsonl, report.html, otel-spans.jsonl and the MLflow store."),
]
DEMO_METRICS = "grounding,facts,lexical"


def score_examples(output: Path, metrics: str = DEMO_METRICS) -> list[ScoredRecord]:
    """Score the bundled example answers (no framework needed) into OUTPUT/scores.jsonl and print them."""
    output.mkdir(parents=True, exist_ok=True)
    path = example_path()
    console.print(f"scoring the bundled examples: {path}")
    tally = score_file(str(path), metrics or DEMO_METRICS, output / "scores.jsonl", 1, {}, keep=1000)
    out.print(records_table(tally.kept, limit=len(tally.kept)))
    out.print(summary_table(tally))
    console.print(f"wrote {tally.count} scored records to {output / 'scores.jsonl'}")
    return tally.kept


# Commands that other distributions provide, and how to get them: `groundtrace demo` lives in groundtrace-demo
# (integrations/demo), which imports LangChain and LlamaIndex; the core imports no framework.
# groundtrace is not on PyPI: the demo is installed from a checkout (or from a team index that `make dist` fed).
PROVIDED_BY = {"demo": "in a checkout of groundtrace run `make demo`, or pip install -e ./integrations/demo "
                       "(groundtrace-demo)"}
placeholders = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)


@placeholders.command("demo", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def demo_placeholder(output: DemoOutputOption = Path("out"), metrics: MetricsOption = None) -> None:
    """Needs groundtrace-demo (not installed): says how to install it, then scores the bundled example answers."""
    console.print("[yellow]`groundtrace demo` runs a LangChain chain and a LlamaIndex query engine; it comes with "
                  f"groundtrace-demo, which is not installed:[/yellow] {PROVIDED_BY['demo']}")
    console.print("Meanwhile, here are the bundled example answers, scored offline.")
    score_examples(output, ",".join(metrics or []))
