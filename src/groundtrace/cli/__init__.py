"""The command line: groundtrace metrics | score | bench | report | synth-hallucinations, and the commands that
other distributions register in the entry-point group groundtrace.commands (groundtrace-demo: `groundtrace demo`).

One module per command (metrics.py, score.py, bench.py, synth.py, report.py; demo.py: the bundled examples and
the placeholder `demo`), what they share in common.py; this module builds the app from them and finds the
commands of other distributions. Its names are the command line's public ones (``groundtrace.cli:main`` is the
``groundtrace`` script; groundtrace-demo imports the options, consoles and ``score_examples`` from here)."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from groundtrace import __version__

from groundtrace.cli.bench import bench_command
# what a plugin command (groundtrace.commands) builds on, besides the demo's pieces
from groundtrace.cli.common import MetricsOption, console, out, parse_options, records_table, summary_table
from groundtrace.cli.demo import DEMO_METRICS, PROVIDED_BY, DemoOutputOption, example_path, placeholders, score_examples
from groundtrace.cli.fit import fit_command
from groundtrace.cli.metrics import metrics_command
from groundtrace.cli.report import report_command
from groundtrace.cli.review import review_command
from groundtrace.cli.score import (
    close_sinks,
    command_line_sinks,
    parse_source_options,
    parse_when,
    parse_where,
    score_command,
)
from groundtrace.cli.synth import synth_command
from groundtrace.cli.watch import watch_command

COMMANDS_GROUP = "groundtrace.commands"  # entry points: sub-commands from other distributions


def plugin_commands() -> dict[str, EntryPoint]:
    """Sub-commands that installed distributions register in the entry-point group groundtrace.commands:
    name -> entry point of a function written as a Typer command."""
    return {entry.name: entry for entry in entry_points(group=COMMANDS_GROUP)}


def as_command(function: Any, name: str) -> Any:
    single = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    single.command(name)(function)
    return typer.main.get_command(single)


class CommandGroup(TyperGroup):
    """groundtrace's own commands, then those of the groundtrace.commands entry points (each imported only when
    it runs or --help lists it), then placeholders naming the distribution to install. (The context and command
    types are click's, which typer >= 0.22 vendors privately: Any here.)"""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return names + [name for name in dict.fromkeys([*plugin_commands(), *PROVIDED_BY]) if name not in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        entry = plugin_commands().get(cmd_name)
        if entry is not None:
            return as_command(entry.load(), cmd_name)
        if cmd_name in PROVIDED_BY:
            return typer.main.get_group(placeholders).get_command(ctx, cmd_name)
        return None


app = typer.Typer(
    cls=CommandGroup,
    add_completion=False,
    no_args_is_help=True,
    help="Hallucination and grounding scores for RAG answers.",
    pretty_exceptions_show_locals=False,
)


def show_version(value: bool) -> None:
    """--version: the version on stdout, exit 0, before any command is looked for (an eager option)."""
    if value:
        print(f"groundtrace {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=show_version, is_eager=True, metavar="",
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


app.command("metrics")(metrics_command)
app.command("score")(score_command)
app.command("bench")(bench_command)
app.command("fit")(fit_command)
app.command("synth-hallucinations")(synth_command)
app.command("report")(report_command)
app.command("watch")(watch_command)
app.command("review")(review_command)


def main() -> None:
    app()


__all__ = [
    "COMMANDS_GROUP",
    "DEMO_METRICS",
    "PROVIDED_BY",
    "CommandGroup",
    "DemoOutputOption",
    "MetricsOption",
    "app",
    "as_command",
    "bench_command",
    "fit_command",
    "close_sinks",
    "command_line_sinks",
    "console",
    "example_path",
    "main",
    "metrics_command",
    "out",
    "parse_options",
    "parse_source_options",
    "parse_when",
    "parse_where",
    "placeholders",
    "plugin_commands",
    "review_command",
    "records_table",
    "report_command",
    "score_command",
    "score_examples",
    "summary_table",
    "synth_command",
]
