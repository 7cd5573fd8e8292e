"""What the commands share: the consoles, the options several commands take, option parsing, the progress
bar and the summary tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from groundtrace.config import Settings
from groundtrace.redaction import redact
from groundtrace.score import ScoredRecord

if TYPE_CHECKING:
    from groundtrace.tally import Tally

console = Console(stderr=True)
out = Console()

# what `watch` and `report` say of a scores file with no records: why there may be none, and how to check
NO_RECORDS_WHY = (
    "no scored answer in {path}. If your application answered, check:\n"
    "  - where its turns went: handler.stats() (LangChain) or groundtrace_llamaindex.stats() counts each turn "
    "that made no record, per reason, and the first one of each reason is logged at WARNING;\n"
    "  - retrieval in your own code (a vector store queried by hand, an f-string prompt) is invisible to the "
    "callbacks: decorate the function with @groundtrace.retrieval;\n"
    "  - the scores go elsewhere when GROUNDTRACE_SINKS names a sink, and wait in a queue until the process "
    "exits normally.\n"
    "  docs: troubleshooting, 'I see no scores'"
)

def metric_names(values: Sequence[str] | None) -> list[str]:
    """-m a -m b,c -> ['a', 'b', 'c']: repeated and comma-separated forms alike, order kept, duplicates dropped."""
    names = (name.strip() for value in values or [] for name in value.split(","))
    return list(dict.fromkeys(name for name in names if name))


MetricsOption = Annotated[
    Optional[list[str]],
    typer.Option("--metrics", "-m", callback=metric_names,
                 help="Metric names, comma-separated or repeated (-m grounding -m facts); none: grounding (plus "
                      "faithfulness when GROUNDTRACE_JUDGE_MODEL is set)."),
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
        options.setdefault(metric, {})[name] = json_or_text(raw)
    return options


def json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=False, disable=not console.is_terminal and not _forceprogress_bar(),
    )


def _forceprogress_bar() -> bool:
    try:
        return Settings.from_env().progress  # GROUNDTRACE_PROGRESS, read by config like every GROUNDTRACE_* variable
    except ValueError:  # another bad variable is reported by the code that needs it, not by a progress bar
        return False


def shown(text: object) -> str:
    """A message of ours for the console: secrets redacted, and brackets shown, not read as markup."""
    return escape(redact(str(text)))


def fmt(value: float | None, digits: int = 3) -> str:
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
            fmt(metric.mean),
            f"{metric.flagged}/{metric.ok}",
            fmt(metric.mean_latency_ms, 1),
        )
    return table


def failure_lines(tally: Tally) -> list[str]:
    """One line per metric that failed on some records, with the first reason: an error Score is never only in
    the file."""
    return [f"[yellow]{name}: {metric.errors} of {metric.records} records failed[/yellow], e.g. {shown(metric.first_error)}"
            for name, metric in tally.metrics.items() if metric.errors and metric.first_error]


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
