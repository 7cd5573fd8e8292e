"""`groundtrace score`: a file of records, or the logged requests of a platform (--from), scored into -o and the
sinks, with a summary and the --max-flagged gates."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from groundtrace.cli.common import (
    MetricsOption,
    OptionsOption,
    SchemaOption,
    EXIT_GATE,
    EXIT_METRIC_FAILED,
    EXIT_USAGE,
    console,
    engine_options,
    with_engine,
    existing_store,
    failed_metrics,
    failure_lines,
    json_or_text,
    jsonl_output,
    parse_options,
    progress_bar,
    records_table,
    shown,
    summary_table,
    tables_console,
    to_stdout,
    written_to,
)
from groundtrace.config import Settings
from groundtrace.score import ScoredRecord

if TYPE_CHECKING:
    from groundtrace.batch.gate import Gate
    from groundtrace.batch.tally import Tally


def score_file(input_path: str, metrics: Sequence[str] | str | None, output: Path | None, workers: int, options: dict,
                sinks: str | None = None, engine: dict[str, Any] | None = None, keep: int = 0,
                schema: str | None = None) -> Tally:
    from groundtrace.batch.stream import score_stream
    from groundtrace.io import count_records, map_rows, read_jsonl, read_layout
    from groundtrace.sinks import emit_all
    from groundtrace.batch.tally import Tally

    # the configuration is read first (a bad variable is named before any file is opened), the layout is
    # settled (or the file refused) before a sink is built or a record scored; a file is streamed (counted
    # first, for the progress bar), stdin can only be read once
    settings = Settings.from_env()
    if input_path == "-":
        stdin = list(read_jsonl(input_path))
        items, total = map_rows(stdin, schema, where="the records on stdin").rows, len(stdin)
    else:
        items, total = read_layout(input_path, schema).rows, count_records(input_path)
    built = command_line_sinks(sinks, settings)
    tally = Tally(keep=keep)
    try:
        # the metrics' preflight runs here: a metric that cannot run at all stops the command before -o is written
        rows = score_stream(items, metrics, options=options, workers=workers, mask=settings.mask, **(engine or {}))
        with jsonl_output(output) as handle, progress_bar() as progress:
            task = progress.add_task("scoring", total=total)
            for row in rows:
                tally.add(row)
                emit_all(built, row.record, row.scores, capture_text=settings.capture_text)
                if handle:
                    handle.write(row.model_dump_json() + "\n")
                progress.advance(task)
    finally:
        close_sinks(built)
    return tally


def close_sinks(sinks: Sequence[Any]) -> None:
    """Close every sink (delivering what it buffered); one that fails is reported, not raised."""
    from groundtrace import sinks as sink_contract

    for problem in sink_contract.close_sinks(sinks):
        console.print(f"[yellow]{shown(problem)}[/yellow]")


SINCE_HELP = ("ISO date or time (UTC unless it names a zone), or an age such as 7d, 12h, 30m")


def parse_when(text: str | None, now: datetime | None = None) -> datetime | None:
    """'2026-11-01', '2026-11-01T08:00:00+02:00' or an age before now ('7d', '12h', '30m', '2w')."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text)
    if match:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match.group(2)]
        return (now or datetime.now(timezone.utc)) - timedelta(**{unit: float(match.group(1))})
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"'{text}' is neither an ISO date/time nor an age like 7d or 12h") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def parse_source_options(pairs: Sequence[str] | None) -> dict[str, Any]:
    """'page_size=500' -> {'page_size': 500}; values are JSON where they parse as JSON."""
    return {key: json_or_text(value) for key, value in parse_where(pairs, "--source-option").items()}


def parse_where(pairs: Sequence[str] | None, option: str = "--where") -> dict[str, str]:
    """'env=prod' -> {'env': 'prod'}."""
    found: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"'{pair}' is not KEY=VALUE", param_hint=option)
        found[key.strip()] = value.strip()
    return found


def command_line_sinks(names: str | None, settings: Any = None) -> list[Any]:
    """The sinks --sinks names ('none' or empty: none), each able to deliver from this process."""
    from groundtrace.sinks import build_sinks, sink_name, sink_undeliverable

    built = build_sinks("" if not names or names.strip().lower() == "none" else names, settings)
    for sink in built:
        reason = sink_undeliverable(sink)
        if reason:
            raise ValueError(f"--sinks {sink_name(sink)}: {reason}")
    return built


def _backfill(spec: str, metrics: Sequence[str] | str | None, output: Path | None, workers: int, options: dict, sinks: str | None,
              filters: Any, rescore: bool, source_options: dict[str, Any],
              engine: dict[str, Any], keep: int = 0) -> tuple[Tally, Any]:
    from groundtrace.batch.backfill import backfill
    from groundtrace.scoring.engine import build_metrics, metric_specs
    from groundtrace.batch.stream import preflight, score_stream
    from groundtrace.sources import open_source
    from groundtrace.batch.tally import Tally

    settings = Settings.from_env()
    names = [name for name, _ in metric_specs(metrics, options, settings)]
    preflight(build_metrics(names, options, settings))  # a metric that cannot run stops it before the source is read
    source = open_source(spec, settings, **source_options)
    if sinks is None:  # by default the scores go back to the platform they were read from
        sinks = source.sink or ""
    built = command_line_sinks(sinks, settings)
    tally = Tally(keep=keep)
    with progress_bar() as progress:
        task = progress.add_task(f"scoring {source.spec}", total=filters.limit)

        def done(row: ScoredRecord) -> None:
            tally.add(row)
            if stdout:  # -o -: the lines go out as they are scored; a file is appended to (and resumed) by backfill
                sys.stdout.write(row.model_dump_json() + "\n")
                sys.stdout.flush()
            progress.advance(task)

        stdout = to_stdout(output)
        try:
            summary = backfill(source, names,
                               lambda records, select: score_stream(records, names, options=options, workers=workers,
                                                                    select=select, **engine),
                               filters=filters, sinks=built, output=None if stdout else output, rescore=rescore,
                               on_result=done,
                               mask=settings.mask, capture_text=settings.capture_text)
        finally:
            close_sinks(built)
            source.close()
    return tally, summary


@with_engine
def score_command(
    input_path: Annotated[Optional[str], typer.Argument(help="Records (question, contexts, answer, ...; or RAGAS / DeepEval fields, see --schema) as JSONL, .csv or .parquet; - for JSONL on stdin; a scores file reads as the records it scored. Or use --from. Default: the default store of live capture.")] = None,
    source: Annotated[Optional[str], typer.Option("--from", help="Score logged requests instead of a file: otel-json:PATH, phoenix:PROJECT, mlflow:EXPERIMENT, langfuse[:PROJECT], langsmith:PROJECT.")] = None,
    metrics: MetricsOption = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Where to write scored records (JSONL); - for stdout (the tables and messages then go to stderr). With --from, a file is appended to: a rerun skips the ids already there.")] = None,
    workers: Annotated[int, typer.Option(help="Records scored concurrently.")] = 1,
    option: OptionsOption = None,
    show: Annotated[int, typer.Option(help="Records to show in the per-record table (0: none).")] = 0,
    since: Annotated[Optional[str], typer.Option(help="With --from: requests that started at or after this: " + SINCE_HELP + ".")] = None,
    until: Annotated[Optional[str], typer.Option(help="With --from: requests that started before this: " + SINCE_HELP + ".")] = None,
    limit: Annotated[Optional[int], typer.Option(help="With --from: score at most N requests.")] = None,
    where: Annotated[Optional[list[str]], typer.Option("--where", help="With --from: KEY=VALUE the request's metadata or tags must hold (repeatable).")] = None,
    sinks: Annotated[Optional[str], typer.Option(help="Where the scores go besides -o: sink names (jsonl, otel, phoenix, mlflow, langfuse, langsmith), comma-separated, or none. With --from the default is the source's own platform.")] = None,
    source_option: Annotated[Optional[list[str]], typer.Option("--source-option", "-S", help="With --from: a source option as KEY=VALUE, e.g. page_size=500 or match=metadata (mlflow) (repeatable).")] = None,
    rescore: Annotated[bool, typer.Option("--rescore", help="With --from: score again what is already scored (on the platform or in -o, which is rewritten).")] = False,
    engine: dict[str, Any] | None = None,  # --engine, --address, --actors, --batch-size (with_engine)
    schema: SchemaOption = None,
    max_flagged: Annotated[Optional[list[str]], typer.Option("--max-flagged", help="A CI gate, METRIC=SHARE (e.g. grounding=0.1 or grounding=10%): exit 1 when more than SHARE of the records are flagged by METRIC; records it could not score count as flagged (repeatable).")] = None,
) -> None:
    """Score every record of a file (JSONL, CSV or Parquet; groundtrace, RAGAS or DeepEval fields), or the logged
    requests of a platform (--from), and print a per-metric summary; with --max-flagged, exit 1 when a gate fails;
    exit 3 when a metric failed on every record."""
    if input_path is not None and source is not None:
        console.print("[red]error:[/red] give a file or --from SOURCE (one of the two)")
        raise typer.Exit(EXIT_USAGE)
    if input_path is None and source is None:
        try:
            input_path = str(existing_store())
        except ValueError as error:
            console.print(f"[red]error:[/red] {shown(error)}", soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None
    summary = None
    try:
        ray = engine_options(**(engine or {}))
        if source is not None and schema is not None:
            raise ValueError("--schema is the layout of a file; a --from source has its own")
        options = parse_options(option)
        from groundtrace.scoring.engine import metric_specs

        # the metrics and gates are checked before anything is read: a typo costs no scoring
        gates = _gates(max_flagged, [name for name, _ in metric_specs(metrics, options)])
        if source is not None:
            from groundtrace.sources import SourceFilter

            filters = SourceFilter(since=parse_when(since), until=parse_when(until), limit=limit, metadata=parse_where(where))
            tally, summary = _backfill(source, metrics, output, workers, options, sinks, filters, rescore,
                                       parse_source_options(source_option), ray, keep=show)
        else:
            assert input_path is not None  # one of the two, checked above
            tally = score_file(input_path, metrics, output, workers, options, sinks, ray, keep=show, schema=schema)
    except typer.BadParameter:
        raise
    except (KeyError, ValueError, FileNotFoundError, RuntimeError, ImportError, ConnectionError) as error:
        console.print(f"[red]error:[/red] {shown(error)}", soft_wrap=True)  # one line, for grep
        raise typer.Exit(EXIT_USAGE) from None
    tables = tables_console(output)
    if show:
        tables.print(records_table(tally.kept, show))
    if tally.count:
        tables.print(summary_table(tally))
    for line in failure_lines(tally):
        console.print(line, soft_wrap=True)
    if summary is not None:
        console.print(summary.line())
        for failure in summary.failures:
            console.print(f"[yellow]failed:[/yellow] {shown(failure)}")
    if output:
        console.print(f"wrote {tally.count} scored records to {written_to(output)}")
    results = [gate.check(tally) for gate in gates]
    for result in results:
        # one line each, never wrapped: a CI log is read with grep
        console.print(result.line(), style=None if result.passed else "red", markup=False, highlight=False, soft_wrap=True)
    # a metric that measured nothing makes its gate meaningless: that is said first (3 before 1)
    if failed_metrics(tally):
        raise typer.Exit(EXIT_METRIC_FAILED)
    if not all(result.passed for result in results):
        raise typer.Exit(EXIT_GATE)


def _gates(specs: Sequence[str] | None, scored: Sequence[str]) -> list[Gate]:
    """The --max-flagged gates, each on one of the ``scored`` metrics."""
    from groundtrace.batch.gate import Gate

    gates = [Gate.parse(spec) for spec in specs or []]
    for gate in gates:
        if gate.metric not in scored:
            raise ValueError(f"--max-flagged {gate.metric}=...: {gate.metric} is not among the metrics scored "
                             f"({', '.join(scored)}); add it to -m")
    return gates
