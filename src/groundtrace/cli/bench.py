"""`groundtrace bench`: metrics measured against labels."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from groundtrace.cli.common import (
    MetricsOption,
    OptionsOption,
    SchemaOption,
    console,
    engine_options,
    with_engine,
    fmt,
    out,
    parse_options,
    progress_bar,
    shown,
)
from groundtrace.cli.labelled_input import RescoreOption, read_labelled, with_labelled_input


@with_engine
@with_labelled_input
def bench_command(
    input_path: Annotated[Optional[Path], typer.Argument(help="Labelled records (label 1 = hallucinated; JSONL, CSV or Parquet), shaped like shared/data or in a --schema layout; or records (a scores file too: its scores are reused) and --labels FILE. Or use --from. Default: the default store of live capture, with the labels `groundtrace review` wrote beside it.")] = None,
    labelled: dict[str, Any] | None = None,  # --from, --labels, --label-name, ... (with_labelled_input)
    metrics: MetricsOption = None,
    rescore: RescoreOption = False,
    threshold: Annotated[Optional[float], typer.Option(help="Threshold on the metric's own scale.")] = None,
    threshold_from: Annotated[
        Optional[Path], typer.Option("--threshold-from", help="Fit the F1-optimal threshold on this labelled file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object keyed by metric name.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N records.")] = None,
    option: OptionsOption = None,
    engine: dict[str, Any] | None = None,  # --engine, --address, --actors, --batch-size (with_engine)
    schema: SchemaOption = None,
    by: Annotated[Optional[list[str]], typer.Option(
        "--by", help="Also break the figures down by this key of the records (repeatable); 'session' names session_id.")] = None,
) -> None:
    """Measure metrics against labels: precision, recall, F1, ROC AUC, balanced accuracy, speed."""
    from groundtrace.measure.bench import run_bench

    with progress_bar() as progress:
        def tick(name: str, total: int):
            task = progress.add_task(name, total=total)
            return lambda: progress.advance(task)

        try:
            read = read_labelled(input_path, **(labelled or {}), limit=limit, schema=schema, by=by or (),
                                 options=parse_options(option), rescore=rescore)
            if read.count is not None:
                (console if as_json else out).print(read.count.line(), markup=False, soft_wrap=True)
            results = run_bench(read.path, metrics or ["grounding"], threshold=threshold, threshold_from=threshold_from,
                                options=parse_options(option), limit=limit, progress=tick,
                                engine=engine_options(**(engine or {})), schema=schema,
                                by=by or (), items=read.items, stored=read.stored)
        except (KeyError, ValueError, FileNotFoundError, ImportError, ConnectionError, RuntimeError) as error:
            console.print(f"[red]error:[/red] {shown(error)}", soft_wrap=True)  # one line, for grep
            raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({name: {**r.as_dict(), "cost": _cost_totals(r.scores)} for name, r in results.items()},
                         indent=2, ensure_ascii=False))
        for name, r in results.items():  # beside the JSON, not in it: stdout stays one JSON object
            if r.trained_on:
                console.print(in_sample_line(name, r.trained_on), style="yellow", markup=False, soft_wrap=True)
        return
    table = Table(title=f"bench: {read.name}")
    for column in ("metric", "group", "n", "AUC", "F1", "precision", "recall", "bal. acc.", "threshold", "rec/s"):
        table.add_column(column, justify="left" if column in ("metric", "group") else "right")
    for name, r in results.items():
        # a group that is the whole file (one task, one language) would only repeat the first row
        rows = [("all", r.overall)] + [(g, s) for g, s in r.groups.items() if s.n + s.errors < r.overall.n + r.overall.errors]
        for group, s in rows:
            speed = r.records_per_s if group == "all" else s.records_per_s
            table.add_row(f"{name} (in-sample)" if r.in_sample and group == "all" else name, group, str(s.n), fmt(s.auc), fmt(s.f1), fmt(s.precision), fmt(s.recall),
                          fmt(s.balanced_accuracy), f"{r.threshold:.4g}" if group == "all" else "",
                          "—" if speed is None else f"{speed:.0f}")
    out.print(table)
    for name, r in results.items():
        if r.trained_on:
            out.print(in_sample_line(name, r.trained_on), style="yellow", markup=False, soft_wrap=True)
        if r.read:
            out.print(f"{name}: {r.read} of {len(r.scores)} scores read from {read.name} (--rescore scores them here)")
        if _judge_cost(r.scores):
            out.print(f"{name}: judge {_judge_cost(r.scores)}")
        if r.spans:
            out.print(f"{name}: spans (character overlap with the gold spans, {r.spans['records']} records): "
                      f"precision {r.spans['precision']:.3f}, recall {r.spans['recall']:.3f}, F1 {r.spans['f1']:.3f}")
        out.print(f"{name}: threshold from {r.threshold_source}; the F1-optimal threshold on this file would be "
                  f"{r.oracle['threshold']:.4g} (F1 {r.oracle['f1']:.3f}, optimistic)")
        if r.overall.errors:
            out.print(f"[yellow]{name}: {r.overall.errors} records failed[/yellow], e.g. {shown(r.first_errors[0])}")


def in_sample_line(name: str, file: dict[str, str]) -> str:
    note = f"; {file['note']}" if file.get("note") else ""
    return (f"{name} was trained on {file['name']} (sha256 {file['sha256'][:12]}…{note}): its numbers here are "
            "in-sample and optimistic; see the model card's cross-validated figures")


def _cost_totals(scores: Sequence[Any]) -> dict[str, Any] | None:
    """Tokens and dollars the judge spent on these scores (None for metrics that call no judge)."""
    costs = [s.cost for s in scores if s.cost is not None]
    if not costs:
        return None
    usd = None if any(c.usd is None for c in costs) else sum(c.usd for c in costs)
    return {"input_tokens": sum(c.input_tokens for c in costs), "output_tokens": sum(c.output_tokens for c in costs),
            "usd": usd, "usd_per_1000_records": None if usd is None else usd / len(scores) * 1000}


def _judge_cost(scores: Sequence[Any]) -> str:
    totals = _cost_totals(scores)
    if totals is None:
        return ""
    text = f"{totals['input_tokens']:,} input + {totals['output_tokens']:,} output tokens"
    if totals["usd"] is None:
        return text + " (no price for this model: pass prices= to see dollars)"
    return text + f", ${totals['usd']:.4f} (${totals['usd_per_1000_records']:.2f} per 1,000 records)"
