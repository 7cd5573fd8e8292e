"""What the commands share: the consoles, the options several commands take, option parsing, the progress
bar and the summary tables."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TextIO

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from groundtrace.config import Settings
from groundtrace.redaction import redact
from groundtrace.score import ScoredRecord

if TYPE_CHECKING:
    from groundtrace.batch.tally import Tally

#: the width of what the commands print into a pipe or a file (no terminal, no COLUMNS): wide enough that no table
#: (fit's, bench's) is cut to rich's default of 80 columns, where a script or a CI log reads it
PIPED_WIDTH = 1000


def _width(stream: Any) -> int | None:
    """None (rich's own choice: the terminal's, or COLUMNS) unless the stream is no terminal and COLUMNS is unset."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return None if terminal or os.environ.get("COLUMNS") else PIPED_WIDTH


console = Console(stderr=True, width=_width(sys.stderr))
out = Console(width=_width(sys.stdout))

# the exit codes of the command line (docs/reference/cli.md lists them); click's own usage errors are 2 too
EXIT_GATE = 1  # a --max-flagged gate failed
EXIT_USAGE = 2  # the run could not start: a usage error, an unknown metric, a missing file or extra
EXIT_METRIC_FAILED = 3  # a metric failed on every record: it measured nothing (a judge that is down)

#: -o - : the JSONL goes to stdout, and everything else the command says to stderr
STDOUT = "-"

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

def store_or(path: Path | None) -> Path:
    """The file a command reads: the one given, else the default store of live capture (GROUNDTRACE_JSONL_PATH,
    else ./groundtrace-scores.jsonl), as `watch`, `review` and `report` open it."""
    return path if path is not None else Settings.from_env().store_path


def existing_store() -> Path:
    """The default store, when a command is given no file; a ValueError that says where it looked when it is not
    there."""
    store = store_or(None)
    if not store.exists():
        raise ValueError(f"give a file of records or --from SOURCE: no file was given, and the default store {store} "
                         "(where live capture writes; GROUNDTRACE_JSONL_PATH moves it) does not exist")
    return store


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


_ENGINE_PARAMETERS = (("engine", EngineOption, "local"), ("address", AddressOption, None), ("actors", ActorsOption, 2),
                      ("batch_size", BatchSizeOption, 64))


def option_group(placeholder: str, parameters: Sequence[tuple[str, Any, Any]]) -> Callable[[Callable[..., Any]], Any]:
    """A decorator: the Typer command takes ``parameters`` (name, Annotated type, default) where its ``placeholder``
    parameter stands, and gets them as that one keyword, a dict by name. Options several commands share are
    declared once."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        spread: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name != placeholder:
                spread.append(parameter)
                continue
            spread += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                         annotation=annotation) for name, annotation, default in parameters]

        @functools.wraps(command)
        def wrapper(**given: Any) -> Any:
            group = {name: given.pop(name) for name, _, _ in parameters}
            return command(**given, **{placeholder: group})

        wrapper.__signature__ = signature.replace(parameters=spread)  # type: ignore[attr-defined]
        return wrapper

    return decorate


#: --engine, --address, --actors and --batch-size, as one ``engine`` dict for :func:`engine_options`
with_engine = option_group("engine", _ENGINE_PARAMETERS)


def engine_options(engine: str, address: str | None, actors: int, batch_size: int) -> dict[str, Any]:
    """What groundtrace.batch.stream.score_stream takes besides the records: the engine, and Ray's settings."""
    if engine == "ray":
        from groundtrace._extras import require_extra

        require_extra("ray", "--engine ray", "ray")  # before any record is read or scored
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


def to_stdout(output: Path | str | None) -> bool:
    return output is not None and str(output) == STDOUT


def tables_console(output: Path | str | None) -> Console:
    """Where a command's tables go: stdout, unless stdout carries the JSONL (-o -)."""
    return console if to_stdout(output) else out


@contextmanager
def jsonl_output(output: Path | str | None) -> Iterator[TextIO | None]:
    """-o: a file written anew; - : stdout (flushed, never closed); none: None."""
    if output is None:
        yield None
    elif to_stdout(output):
        yield sys.stdout
        sys.stdout.flush()
    else:
        with open(output, "w", encoding="utf-8") as handle:
            yield handle


def written_to(output: Path | str) -> str:
    return "stdout" if to_stdout(output) else str(output)


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


#: what a terminal would act on rather than show: C0 controls but tab and newline, DEL, C1 controls (ESC ] 52 writes the
#: clipboard, ESC [ 2 J clears the screen); text from answers and files is shown with them written out (\x1b)
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: object) -> str:
    """``text`` with every control character a terminal would act on written out as ``\\xNN``: inert, visible."""
    return _TERMINAL_CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", str(text))


def shown(text: object) -> str:
    """A message of ours for the console: secrets redacted, control characters inert, and brackets shown, not
    read as markup."""
    return escape(terminal_safe(redact(str(text))))


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
    """One line per metric that failed on some records, with a reason: an error Score is never only in the file.
    A metric that failed on every record measured nothing: its line is red and names the most common reason."""
    lines = []
    for name, metric in tally.metrics.items():
        common = metric.most_common_error
        if metric.all_failed and common:
            lines.append(f"[red]{name}: {metric.errors} of {metric.records} records failed, nothing measured "
                         f"(exit {EXIT_METRIC_FAILED})[/red]; the most common error ({common[1]} record{'s' * (common[1] != 1)}): "
                         f"{shown(common[0])}")
        elif metric.errors and metric.first_error:
            lines.append(f"[yellow]{name}: {metric.errors} of {metric.records} records failed[/yellow], "
                         f"e.g. {shown(metric.first_error)}")
    return lines


def failed_metrics(tally: Tally) -> list[str]:
    """The metrics that failed on every record they were given."""
    return [name for name, metric in tally.metrics.items() if metric.all_failed]


ANSWER_CHARS = 60  # the answer column shows its beginning; the flagged text is shown whole
LONGEST_WORD = 30  # the unsupported column is at least as wide as its longest word, up to this


def records_table(rows: Sequence[ScoredRecord], limit: int = 20) -> Table:
    """The first ``limit`` records: id, the answer's beginning, each metric's value, and every unsupported span
    whole, quoted, one per line in the answer's order, wrapped between words (a word is never cut, so the flagged text can be read and
    searched for; only a word wider than LONGEST_WORD folds, and no character is dropped)."""
    shown_rows = rows[:limit]
    spans = [_flagged_texts(row) for row in shown_rows]
    longest = max((cell_len(word) for texts in spans for text in texts for word in text.split()), default=0)
    table = Table(title="Per record", show_lines=False)
    table.add_column("id")
    table.add_column("answer")
    metrics = list(dict.fromkeys(s.metric for r in shown_rows for s in r.scores))
    for name in metrics:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("unsupported", min_width=min(longest + 2, LONGEST_WORD), overflow="fold")
    for row, texts in zip(shown_rows, spans, strict=True):
        cells = []
        for name in metrics:
            s = row.score(name)
            cells.append("error" if s is None or not s.ok else f"{s.value:.2f}{' ⚠' if s.hallucinated else ''}")
        # Text, not markup: an answer's own brackets are shown, never read as styles
        table.add_row(Text(terminal_safe(row.id or "")), Text(terminal_safe(_beginning(row.record.answer or "", ANSWER_CHARS))),
                      *cells, Text(terminal_safe("\n".join(f'"{text}"' for text in texts))))
    return table


def _flagged_texts(row: ScoredRecord) -> list[str]:
    """Each distinct span text any metric flagged, in the order they stand in the answer."""
    ordered = sorted((sp for s in row.scores for sp in s.spans), key=lambda sp: (sp.start, sp.end))
    return list(dict.fromkeys(" ".join(sp.text.split()) for sp in ordered))


def _beginning(text: str, chars: int) -> str:
    """``text`` up to about ``chars`` characters, ended between two words with … where it was longer."""
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars + 1)
    return text[:cut if cut > 0 else chars].rstrip(" ,;:") + " …"
