"""A MkDocs hook: the command-line reference (docs/reference/cli.md) is written from the command definitions at
build time, so it cannot drift from them.

Where a page holds the marker ``<!-- groundtrace-cli -->``, every command that ``groundtrace --help`` lists (its
own and those that installed distributions register, such as ``groundtrace demo``) is rendered from the Typer app:
its help, its usage line and a table of its arguments and options. ``<!-- groundtrace-run -->`` becomes the
launcher's own ``--help``. (typer vendors click privately, so mkdocs-click cannot read the app: this walks the
command objects typer builds.)"""

from __future__ import annotations

import re
import os
import subprocess
import sys
from typing import Any

CLI_MARKER = "<!-- groundtrace-cli -->"
RUN_MARKER = "<!-- groundtrace-run -->"


def _text(help_text: str) -> str:
    """Rich markup escapes (``\\[``) undone, newlines joined: one markdown table cell."""
    return re.sub(r"\s+", " ", help_text.replace("\\[", "[")).strip().replace("|", "\\|")


def command_reference() -> str:
    import typer

    from groundtrace.cli import app

    group = typer.main.get_command(app)
    context = group.context_class(group, info_name="groundtrace")
    lines = [f"`groundtrace` {_text(group.help or '')}", "", "```text",
             f"groundtrace {' '.join(group.collect_usage_pieces(context))}", "```", ""]
    for name in group.list_commands(context):
        command: Any = group.get_command(context, name)
        sub = command.context_class(command, info_name=name, parent=context)
        lines += [f"## groundtrace {name} {{#{name}}}", "", (command.help or "").replace("\\[", "[").strip(), "",
                  "```text", f"groundtrace {name} {' '.join(command.collect_usage_pieces(sub))}", "```", ""]
        rows = [(param.param_type_name, param.get_help_record(sub)) for param in command.get_params(sub)]
        rows = [(kind, record) for kind, record in rows if record is not None]
        if rows:
            lines += ["| argument or option | meaning |", "|---|---|"]
            lines += [f"| `{_text(names)}` | {_text(meaning)} |" for _, (names, meaning) in rows]
            lines.append("")
    return "\n".join(lines)


def launcher_reference() -> str:
    done = subprocess.run([sys.executable, "-m", "groundtrace.monitor.launcher", "--help"], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "COLUMNS": "100"})
    return "```text\n" + done.stdout.strip() + "\n```\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, command_reference())
    if RUN_MARKER in markdown:
        markdown = markdown.replace(RUN_MARKER, launcher_reference())
    return markdown
