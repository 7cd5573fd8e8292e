"""`groundtrace synth-hallucinations`: hallucinated answers written by a judge model, as labelled rows for
`groundtrace bench`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from groundtrace.cli.common import EXIT_METRIC_FAILED, EXIT_USAGE, console, jsonl_output, shown, to_stdout, written_to


def synth_command(
    input_path: Annotated[str, typer.Argument(help="JSONL of records with question, contexts and answer (shared/data format).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the labelled rows (JSONL); - for stdout.")],
    model: Annotated[str | None, typer.Option(help="Judge model (default: GROUNDTRACE_JUDGE_MODEL, else gpt-4o-mini).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (default: OPENAI_BASE_URL).")] = None,
    with_originals: Annotated[bool, typer.Option("--with-originals", help="Also write each original row (label 0 unless it has one).")] = False,
    limit: Annotated[int | None, typer.Option(help="Use only the first N records.")] = None,
    workers: Annotated[int, typer.Option(help="Records rewritten concurrently.")] = 2,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the hallucinating assistant.")] = 0.7,
    seed: Annotated[int, typer.Option(help="Picks each record's hallucination style; sent to the model as its seed.")] = 0,
    timeout_s: Annotated[float, typer.Option(help="Per-request timeout in seconds.")] = 120.0,
) -> None:
    """Write hallucinated answers with a judge model, as labelled rows for `groundtrace bench`."""
    from itertools import islice

    from groundtrace.backends.judge import JudgeClient, JudgeError
    from groundtrace.io import read_jsonl
    from groundtrace.measure.synth_hallucinations import SynthStats, synthesize

    stats = SynthStats()
    try:
        client = JudgeClient(model, base_url=base_url, timeout_s=timeout_s, concurrency=max(1, workers))
        rows = islice(read_jsonl(input_path), limit) if limit else read_jsonl(input_path)
        if not to_stdout(output):
            output.parent.mkdir(parents=True, exist_ok=True)
        made = synthesize(rows, client, include_originals=with_originals, workers=workers, seed=seed,
                          temperature=temperature, stats=stats)
        with jsonl_output(output) as handle:
            assert handle is not None  # -o is required
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in made)
    except (JudgeError, ValueError, FileNotFoundError) as error:
        console.print(f"[red]error:[/red] {shown(error)}")
        raise typer.Exit(EXIT_USAGE) from None
    console.print(f"read {stats.read} records: wrote {stats.written} hallucinated rows"
                  + (f" and {stats.originals} originals" if with_originals else "")
                  + f" to {written_to(output)}; {stats.unchanged} unchanged by the model, {stats.skipped} without answer or contexts, "
                  f"{stats.failed} failed")
    for failure in stats.errors:
        console.print(f"[yellow]failed:[/yellow] {shown(failure)}")
    if stats.read and not stats.written:  # the model made nothing of any record, like a metric that measured nothing
        raise typer.Exit(EXIT_METRIC_FAILED)
