"""`groundtrace report`: one self-contained HTML page of scored records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from groundtrace.cli.common import NO_RECORDS_WHY, SchemaOption, console, store_or

TRACE_URL_HELP = ("A link per record to its trace: a URL template with {trace_id}, {span_id}, {run_id}, {session_id}, {id} "
                  "or {links.NAME}, e.g. 'http://localhost:6006/redirects/traces/{trace_id}' (default: GROUNDTRACE_TRACE_URL).")


def is_review_labels(path: Path) -> bool:
    """Whether ``path`` is a `groundtrace review` labels file (JSON lines of decisions) rather than a
    labelled file of records (JSONL, CSV or Parquet with a 0/1 ``label``): its first decision tells, within
    its first lines (a torn or hand-edited first line is skipped by the labels reader, so it is here)."""
    from itertools import islice

    from groundtrace.io.labels import CHOICES

    if path.suffix.lower() in (".csv", ".parquet", ".pq"):
        return False
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in islice((line for line in lines if line.strip()), 100):
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(row, dict) and row.get("label") in CHOICES and "answer" not in row:
                return True
    return False


def review_labels(path: Path) -> dict[str, Mapping[str, Any]]:
    """A review labels file as the report's labelled rows: {id: {"label": 0/1}}, the skips left out."""
    from groundtrace.io.labels import read_labels

    return {key: {"label": label} for key, label in read_labels(path).items()}


def report_command(
    input_path: Annotated[Path | None, typer.Argument(help="Scored records (JSONL) from `groundtrace score`, `groundtrace demo` or live capture. Default: the default store (GROUNDTRACE_JSONL_PATH, else ./groundtrace-scores.jsonl), as `watch` and `review` open it.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write the HTML page (default: the input with .html).")] = None,
    labels: Annotated[Path | None, typer.Option("--labels", "--bench-labels", help="Labels joined by record id: the labelled file that was scored (label 0/1, gold spans; JSONL, CSV or Parquet) or a `groundtrace review` labels file. Adds precision, recall and the confusion cells at any threshold, ROC curves and reliability diagrams.")] = None,
    schema: SchemaOption = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Another run's scores of the same records (e.g. before a change): what changed from it, per record and in the rates.")] = None,
    trace_url: Annotated[str | None, typer.Option("--trace-url", help=TRACE_URL_HELP)] = None,
) -> None:
    """Write one self-contained HTML page: summary, threshold what-if, breakdowns, a sortable table and every record with its unsupported spans marked."""
    from pydantic import ValidationError
    from rich.markup import escape

    from groundtrace.config import trace_url as trace_url_from_env
    from groundtrace.record import describe_validation_error
    from groundtrace.report import write_report
    from groundtrace.review.evidence import checked_claims

    template = trace_url or trace_url_from_env()
    input_path = store_or(input_path)
    try:
        if schema is not None and labels is None:
            raise ValueError("--schema is the layout of the --labels file; give --labels too")
        review = labels is not None and labels.exists() and schema is None and is_review_labels(labels)
        written = write_report(input_path, output, labels=None if review else labels, schema=schema,
                               labelled=review_labels(labels) if review and labels is not None else None,
                               trace_url=template, evidence=checked_claims, compare_with=compare)
    except FileNotFoundError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    except ValidationError as error:
        console.print(f"[red]error:[/red] {input_path} is not a file of scored records: {describe_validation_error(error)}")
        raise typer.Exit(2) from None
    except ValueError as error:  # a bad layout, template or labels file (LabelsFileError is one)
        console.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None
    console.print(f"wrote {written.path}: {written.records} records"
                  + (f", {written.labelled} with gold labels" if labels is not None else ""))
    if not written.records:
        console.print(NO_RECORDS_WHY.format(path=input_path), style="yellow", markup=False, soft_wrap=True)
    if labels is not None and not written.labelled:
        console.print(f"[yellow]no record id of {input_path} is in {labels}: nothing to compare with[/yellow]")
