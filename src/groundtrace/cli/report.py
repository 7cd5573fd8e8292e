"""`groundtrace report`: one self-contained HTML page of scored records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from groundtrace.cli.common import NO_RECORDS_WHY, SchemaOption, console


def report_command(
    input_path: Annotated[Path, typer.Argument(help="Scored records (JSONL) from `groundtrace score` or `groundtrace demo`.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write the HTML page (default: the input with .html).")] = None,
    labels: Annotated[Path | None, typer.Option("--labels", "--bench-labels", help="The labelled file that was scored (label 0/1, gold spans; JSONL, CSV or Parquet), joined by id: adds gold spans, ROC curves and reliability diagrams.")] = None,
    schema: SchemaOption = None,
) -> None:
    """Write one self-contained HTML page: summary, plots, a sortable table and every record with its unsupported spans marked."""
    from pydantic import ValidationError

    from groundtrace.record import describe_validation_error
    from groundtrace.report import write_report

    try:
        if schema is not None and labels is None:
            raise ValueError("--schema is the layout of the --labels file; give --labels too")
        written = write_report(input_path, output, labels=labels, schema=schema)
    except FileNotFoundError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    except ValidationError as error:
        console.print(f"[red]error:[/red] {input_path} is not a file of scored records: {describe_validation_error(error)}")
        raise typer.Exit(2) from None
    except ValueError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    console.print(f"wrote {written.path}: {written.records} records"
                  + (f", {written.labelled} with gold labels" if labels is not None else ""))
    if not written.records:
        console.print(NO_RECORDS_WHY.format(path=input_path), style="yellow", markup=False, soft_wrap=True)
    if labels is not None and not written.labelled:
        console.print(f"[yellow]no record id of {input_path} is in {labels}: nothing to compare with[/yellow]")
