"""The command line: groundtrace metrics | score | bench | report | synth-hallucinations, and the commands that
other distributions register in the entry-point group groundtrace.commands (groundtrace-demo: `groundtrace demo`)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperGroup

from groundtrace.config import Settings
from groundtrace.redaction import redact
from groundtrace.score import ScoredRecord

if TYPE_CHECKING:
    from groundtrace.gate import Gate
    from groundtrace.tally import Tally

COMMANDS_GROUP = "groundtrace.commands"  # entry points: sub-commands from other distributions


def plugin_commands() -> dict[str, Any]:
    """Sub-commands that installed distributions register in the entry-point group groundtrace.commands:
    name -> entry point of a function written as a Typer command."""
    return {entry.name: entry for entry in entry_points(group=COMMANDS_GROUP)}


def as_command(function: Any, name: str) -> Any:
    single = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    single.command(name)(function)
    return typer.main.get_command(single)


class CommandGroup(TyperGroup):
    """groundtrace's own commands, then those of the groundtrace.commands entry points (each imported only when
    it runs or --help lists it), then placeholders naming the distribution to install."""

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
console = Console(stderr=True)
out = Console()

MetricsOption = Annotated[
    str,
    typer.Option("--metrics", "-m", help="Comma-separated metric names; empty: grounding (plus faithfulness when "
                                         "GROUNDTRACE_JUDGE_MODEL is set)."),
]
OptionsOption = Annotated[
    Optional[list[str]],
    typer.Option("--option", "-O", help="A metric option as METRIC.KEY=VALUE, e.g. facts.mode=seed (repeatable)."),
]
EngineOption = Annotated[str, typer.Option("--engine", help="local (default): this process; ray: a Ray cluster's actors "
                                                               "(pip install 'groundtrace\\[ray]').")]
AddressOption = Annotated[Optional[str], typer.Option("--address", help="With --engine ray: auto, HOST:PORT or ray://HOST:PORT "
                                                                        "of an existing cluster (default: a local one).")]
ActorsOption = Annotated[int, typer.Option("--actors", help="With --engine ray: scoring actors (one CPU each).")]
BatchSizeOption = Annotated[int, typer.Option("--batch-size", help="With --engine ray: records per actor batch.")]
SchemaOption = Annotated[Optional[str], typer.Option(
    "--schema", help="The records' layout: groundtrace, ragas (>= 0.2: user_input, retrieved_contexts, response, "
                     "reference), ragas-legacy (question, contexts, answer, ground_truth or ground_truths), deepeval (input, "
                     "actual_output, retrieval_context, expected_output). Default: detected from the keys.")]


def engine_options(engine: str, address: str | None, actors: int, batch_size: int) -> dict[str, Any]:
    """What groundtrace.stream.score_stream takes besides the records: the engine, and Ray's settings."""
    if engine == "ray":
        return {"engine": "ray", "address": address, "actors": actors, "batch_size": batch_size}
    if engine != "local":
        raise typer.BadParameter(f"'{engine}' is not an engine; choose local or ray", param_hint="--engine")
    return {"engine": "local"}


def parse_options(pairs: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """'facts.mode=seed' -> {'facts': {'mode': 'seed'}}; values are JSON where they parse as JSON."""
    options: dict[str, dict[str, Any]] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        metric, dot, name = key.partition(".")
        if not sep or not dot or not metric or not name:
            raise typer.BadParameter(f"'{pair}' is not METRIC.KEY=VALUE", param_hint="--option")
        options.setdefault(metric, {})[name] = _json_or_text(raw)
    return options


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=False, disable=not console.is_terminal and not _force_progress(),
    )


def _force_progress() -> bool:
    try:
        return Settings.from_env().progress  # GROUNDTRACE_PROGRESS, read by config like every GROUNDTRACE_* variable
    except ValueError:  # another bad variable is reported by the code that needs it, not by a progress bar
        return False


def _shown(text: object) -> str:
    """A message of ours for the console: secrets redacted, and brackets shown, not read as markup."""
    return escape(redact(str(text)))


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summary_table(tally: Tally, title: str = "Scores") -> Table:
    table = Table(title=title)
    for column in ("metric", "direction", "records", "errors", "mean", "flagged", "mean ms"):
        table.add_column(column, justify="left" if column in ("metric", "direction") else "right")
    for name, metric in tally.metrics.items():
        table.add_row(
            name,
            "higher = grounded" if metric.higher_is_better else "higher = hallucinated",
            str(metric.records),
            str(metric.errors),
            _fmt(metric.mean),
            f"{metric.flagged}/{metric.ok}",
            _fmt(metric.mean_latency_ms, 1),
        )
    return table


def records_table(rows: Sequence[ScoredRecord], limit: int = 20) -> Table:
    table = Table(title="Per record", show_lines=False)
    table.add_column("id")
    table.add_column("answer")
    metrics = list(dict.fromkeys(s.metric for r in rows for s in r.scores))
    for name in metrics:
        table.add_column(name, justify="right")
    table.add_column("unsupported")
    for row in rows[:limit]:
        cells = []
        for name in metrics:
            s = row.score(name)
            cells.append("error" if s is None or not s.ok else f"{s.value:.2f}{' ⚠' if s.hallucinated else ''}")
        spans = sorted({sp.text for s in row.scores for sp in s.spans})
        answer = (row.record.answer or "")[:60] + ("…" if len(row.record.answer or "") > 60 else "")
        table.add_row(row.id or "", answer, *cells, ", ".join(spans)[:50])
    return table


@app.command("metrics")
def metrics_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per metric, as a list.")] = False,
) -> None:
    """List the metrics, what each needs, its direction and the threshold it uses."""
    from groundtrace.metrics import metric_class, metric_names

    rows = []
    for name in metric_names():
        cls = metric_class(name)
        rows.append({"name": name, "needs": list(cls.requires), "higher_is_better": cls.higher_is_better,
                     "threshold": cls.documented_threshold(), "description": cls.description})
    if as_json:
        out.print_json(json.dumps(rows))
        return
    direction = lambda row: "higher = grounded" if row["higher_is_better"] else "higher = hallucinated"  # noqa: E731
    if not out.is_terminal:  # piped: plain tab-separated rows that grep and cut can read
        for row in rows:
            print("\t".join([row["name"], ",".join(row["needs"]), direction(row), f"{row['threshold']:g}", row["description"]]))
        return
    table = Table(title="groundtrace metrics")
    # identifiers are never cut: the name and threshold columns keep their width, the description wraps
    table.add_column("name", no_wrap=True, min_width=max(len(r["name"]) for r in rows))
    table.add_column("needs", overflow="fold")
    table.add_column("direction", overflow="fold")
    table.add_column("threshold", no_wrap=True)
    table.add_column("what it measures", ratio=1)
    for row in rows:
        table.add_row(row["name"], ", ".join(row["needs"]), direction(row), f"{row['threshold']:g}", row["description"])
    out.print(table)


def _score_file(input_path: str, metrics: str, output: Path | None, workers: int, options: dict,
                sinks: str | None = None, engine: dict[str, Any] | None = None, keep: int = 0,
                schema: str | None = None) -> Tally:
    from groundtrace.stream import score_stream
    from groundtrace.io import count_records, map_rows, read_jsonl, read_layout
    from groundtrace.sinks import emit_all
    from groundtrace.tally import Tally

    # the layout is settled (or the file refused) before a sink is built or a record scored;
    # a file is streamed (counted first, for the progress bar), stdin can only be read once
    if input_path == "-":
        stdin = list(read_jsonl(input_path))
        items, total = map_rows(stdin, schema, where="the records on stdin").rows, len(stdin)
    else:
        items, total = read_layout(input_path, schema).rows, count_records(input_path)
    settings = Settings.from_env()
    built = command_line_sinks(sinks, settings)
    tally = Tally(keep=keep)
    sink = open(output, "w", encoding="utf-8") if output else nullcontext(None)
    try:
        with sink as handle, _progress() as progress:
            task = progress.add_task("scoring", total=total)
            for row in score_stream(items, metrics, options=options, workers=workers, mask=settings.mask,
                                    **(engine or {})):
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
        console.print(f"[yellow]{_shown(problem)}[/yellow]")


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
    return {key: _json_or_text(value) for key, value in parse_where(pairs, "--source-option").items()}


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


def _backfill(spec: str, metrics: str, output: Path | None, workers: int, options: dict, sinks: str | None,
              filters: Any, rescore: bool, source_options: dict[str, Any],
              engine: dict[str, Any], keep: int = 0) -> tuple[Tally, Any]:
    from groundtrace.backfill import backfill
    from groundtrace.engine import metric_specs
    from groundtrace.stream import score_stream
    from groundtrace.sources import open_source
    from groundtrace.tally import Tally

    settings = Settings.from_env()
    source = open_source(spec, settings, **source_options)
    names = [name for name, _ in metric_specs(metrics, options, settings)]
    if sinks is None:  # by default the scores go back to the platform they were read from
        sinks = source.sink or ""
    built = command_line_sinks(sinks, settings)
    tally = Tally(keep=keep)
    with _progress() as progress:
        task = progress.add_task(f"scoring {source.spec}", total=filters.limit)

        def done(row: ScoredRecord) -> None:
            tally.add(row)
            progress.advance(task)

        try:
            summary = backfill(source, names,
                               lambda records, select: score_stream(records, names, options=options, workers=workers,
                                                                    select=select, **engine),
                               filters=filters, sinks=built, output=output, rescore=rescore, on_result=done,
                               mask=settings.mask, capture_text=settings.capture_text)
        finally:
            close_sinks(built)
            source.close()
    return tally, summary


@app.command("score")
def score_command(
    input_path: Annotated[Optional[str], typer.Argument(help="Records (question, contexts, answer, ...; or RAGAS / DeepEval fields, see --schema) as JSONL, .csv or .parquet; - for JSONL on stdin. Or use --from.")] = None,
    source: Annotated[Optional[str], typer.Option("--from", help="Score logged requests instead of a file: otel-json:PATH, phoenix:PROJECT, mlflow:EXPERIMENT, langfuse[:PROJECT], langsmith:PROJECT.")] = None,
    metrics: MetricsOption = "",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Where to write scored records (JSONL). With --from, appended to: a rerun skips the ids already there.")] = None,
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
    engine: EngineOption = "local",
    address: AddressOption = None,
    actors: ActorsOption = 2,
    batch_size: BatchSizeOption = 64,
    schema: SchemaOption = None,
    max_flagged: Annotated[Optional[list[str]], typer.Option("--max-flagged", help="A CI gate, METRIC=SHARE (e.g. grounding=0.1 or grounding=10%): exit 1 when more than SHARE of the records are flagged by METRIC; records it could not score count as flagged (repeatable).")] = None,
) -> None:
    """Score every record of a file (JSONL, CSV or Parquet; groundtrace, RAGAS or DeepEval fields), or the logged
    requests of a platform (--from), and print a per-metric summary; with --max-flagged, exit 1 when a gate fails."""
    if (input_path is None) == (source is None):
        console.print("[red]error:[/red] give a file or --from SOURCE (one of the two)")
        raise typer.Exit(2)
    summary = None
    ray = engine_options(engine, address, actors, batch_size)
    try:
        if source is not None and schema is not None:
            raise ValueError("--schema is the layout of a file; a --from source has its own")
        options = parse_options(option)
        from groundtrace.engine import metric_specs

        # the metrics and gates are checked before anything is read: a typo costs no scoring
        gates = _gates(max_flagged, [name for name, _ in metric_specs(metrics, options)])
        if source is not None:
            from groundtrace.sources import SourceFilter

            filters = SourceFilter(since=parse_when(since), until=parse_when(until), limit=limit, metadata=parse_where(where))
            tally, summary = _backfill(source, metrics, output, workers, options, sinks, filters, rescore,
                                       parse_source_options(source_option), ray, keep=show)
        else:
            tally = _score_file(input_path, metrics, output, workers, options, sinks, ray, keep=show, schema=schema)
    except typer.BadParameter:
        raise
    except (KeyError, ValueError, FileNotFoundError, RuntimeError, ImportError, ConnectionError) as error:
        console.print(f"[red]error:[/red] {_shown(error)}")
        raise typer.Exit(2) from None
    if show:
        out.print(records_table(tally.kept, show))
    if tally.count:
        out.print(summary_table(tally))
    if summary is not None:
        console.print(summary.line())
        for failure in summary.failures:
            console.print(f"[yellow]failed:[/yellow] {_shown(failure)}")
    if output:
        console.print(f"wrote {tally.count} scored records to {output}")
    results = [gate.check(tally) for gate in gates]
    for result in results:
        # one line each, never wrapped: a CI log is read with grep
        console.print(result.line(), style=None if result.passed else "red", markup=False, highlight=False, soft_wrap=True)
    if not all(result.passed for result in results):
        raise typer.Exit(1)


def _gates(specs: Sequence[str] | None, scored: Sequence[str]) -> list[Gate]:
    """The --max-flagged gates, each on one of the ``scored`` metrics."""
    from groundtrace.gate import Gate

    gates = [Gate.parse(spec) for spec in specs or []]
    for gate in gates:
        if gate.metric not in scored:
            raise ValueError(f"--max-flagged {gate.metric}=...: {gate.metric} is not among the metrics scored "
                             f"({', '.join(scored)}); add it to -m")
    return gates


@app.command("bench")
def bench_command(
    input_path: Annotated[Path, typer.Argument(help="Labelled records (label 1 = hallucinated; JSONL, CSV or Parquet), shaped like shared/data or in a --schema layout.")],
    metrics: MetricsOption = "grounding",
    threshold: Annotated[Optional[float], typer.Option(help="Threshold on the metric's own scale.")] = None,
    threshold_from: Annotated[
        Optional[Path], typer.Option("--threshold-from", help="Fit the F1-optimal threshold on this labelled file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object keyed by metric name.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N records.")] = None,
    option: OptionsOption = None,
    engine: EngineOption = "local",
    address: AddressOption = None,
    actors: ActorsOption = 2,
    batch_size: BatchSizeOption = 64,
    schema: SchemaOption = None,
) -> None:
    """Measure metrics against labels: precision, recall, F1, ROC AUC, balanced accuracy, speed."""
    from groundtrace.bench import run_bench

    with _progress() as progress:
        def tick(name: str, total: int):
            task = progress.add_task(name, total=total)
            return lambda: progress.advance(task)

        try:
            results = run_bench(input_path, metrics, threshold=threshold, threshold_from=threshold_from,
                                options=parse_options(option), limit=limit, progress=tick,
                                engine=engine_options(engine, address, actors, batch_size), schema=schema)
        except (KeyError, ValueError, FileNotFoundError, ImportError, ConnectionError) as error:
            console.print(f"[red]error:[/red] {_shown(error)}")
            raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({name: {**r.as_dict(), "cost": _cost_totals(r.scores)} for name, r in results.items()},
                         indent=2, ensure_ascii=False))
        return
    table = Table(title=f"bench: {input_path.name}")
    for column in ("metric", "group", "n", "AUC", "F1", "precision", "recall", "bal. acc.", "threshold", "rec/s"):
        table.add_column(column, justify="left" if column in ("metric", "group") else "right")
    for name, r in results.items():
        # a group that is the whole file (one task, one language) would only repeat the first row
        rows = [("all", r.overall)] + [(g, s) for g, s in r.groups.items() if s.n + s.errors < r.overall.n + r.overall.errors]
        for group, s in rows:
            speed = r.records_per_s if group == "all" else s.records_per_s
            table.add_row(name, group, str(s.n), _fmt(s.auc), _fmt(s.f1), _fmt(s.precision), _fmt(s.recall),
                          _fmt(s.balanced_accuracy), f"{r.threshold:.4g}" if group == "all" else "",
                          "—" if speed is None else f"{speed:.0f}")
    out.print(table)
    for name, r in results.items():
        if _judge_cost(r.scores):
            out.print(f"{name}: judge {_judge_cost(r.scores)}")
        if r.spans:
            out.print(f"{name}: spans (character overlap with the gold spans, {r.spans['records']} records): "
                      f"precision {r.spans['precision']:.3f}, recall {r.spans['recall']:.3f}, F1 {r.spans['f1']:.3f}")
        out.print(f"{name}: threshold from {r.threshold_source}; the F1-optimal threshold on this file would be "
                  f"{r.oracle['threshold']:.4g} (F1 {r.oracle['f1']:.3f}, optimistic)")
        if r.overall.errors:
            out.print(f"[yellow]{name}: {r.overall.errors} records failed[/yellow], e.g. {_shown(r.first_errors[0])}")


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


@app.command("synth-hallucinations")
def synth_command(
    input_path: Annotated[str, typer.Argument(help="JSONL of records with question, contexts and answer (shared/data format).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the labelled rows (JSONL).")],
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
    from groundtrace.synth_hallucinations import SynthStats, synthesize

    stats = SynthStats()
    try:
        client = JudgeClient(model, base_url=base_url, timeout_s=timeout_s, concurrency=max(1, workers))
        rows = islice(read_jsonl(input_path), limit) if limit else read_jsonl(input_path)
        output.parent.mkdir(parents=True, exist_ok=True)
        made = synthesize(rows, client, include_originals=with_originals, workers=workers, seed=seed,
                          temperature=temperature, stats=stats)
        with open(output, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in made)
    except (JudgeError, ValueError, FileNotFoundError) as error:
        console.print(f"[red]error:[/red] {_shown(error)}")
        raise typer.Exit(2) from None
    console.print(f"read {stats.read} records: wrote {stats.written} hallucinated rows"
                  + (f" and {stats.originals} originals" if with_originals else "")
                  + f" to {output}; {stats.unchanged} unchanged by the model, {stats.skipped} without answer or contexts, "
                  f"{stats.failed} failed")
    for error in stats.errors:
        console.print(f"[yellow]failed:[/yellow] {_shown(error)}")
    if stats.read and not stats.written:
        raise typer.Exit(1)


@app.command("report")
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
    if labels is not None and not written.labelled:
        console.print(f"[yellow]no record id of {input_path} is in {labels}: nothing to compare with[/yellow]")


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
    tally = _score_file(str(path), metrics or DEMO_METRICS, output / "scores.jsonl", 1, {}, keep=1000)
    out.print(records_table(tally.kept, limit=len(tally.kept)))
    out.print(summary_table(tally))
    console.print(f"wrote {tally.count} scored records to {output / 'scores.jsonl'}")
    return tally.kept


# Commands that other distributions provide, and how to get them: `groundtrace demo` lives in groundtrace-demo
# (integrations/demo), which imports LangChain and LlamaIndex; the core imports no framework.
PROVIDED_BY = {"demo": "pip install groundtrace-demo  (in a checkout of groundtrace: make demo, "
                       "or pip install -e integrations/demo)"}
placeholders = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)


@placeholders.command("demo", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def demo_placeholder(output: DemoOutputOption = Path("out"), metrics: MetricsOption = DEMO_METRICS) -> None:
    """Needs groundtrace-demo (not installed): says how to install it, then scores the bundled example answers."""
    console.print("[yellow]`groundtrace demo` runs a LangChain chain and a LlamaIndex query engine; it comes with "
                  f"groundtrace-demo, which is not installed:[/yellow] {PROVIDED_BY['demo']}")
    console.print("Meanwhile, here are the bundled example answers, scored offline.")
    score_examples(output, metrics)


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
