"""`groundtrace metrics`: the metrics, what each needs, its direction and its threshold."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Annotated

import typer
from rich.table import Table

from groundtrace.cli.common import out


def metrics_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per metric, as a list.")] = False,
) -> None:
    """List the metrics, what each needs, its direction and the threshold it uses."""
    from groundtrace.metrics import metric_class, metric_names

    rows = []
    for name in metric_names():
        cls = metric_class(name)
        rows.append(MetricInfo(name, list(cls.requires), cls.higher_is_better, cls.documented_threshold(), cls.description))
    if as_json:
        out.print_json(json.dumps([asdict(row) for row in rows]))
        return
    if not out.is_terminal:  # piped: plain tab-separated rows that grep and cut can read
        for row in rows:
            print("\t".join([row.name, ",".join(row.needs), row.direction, f"{row.threshold:g}", row.description]))
        return
    table = Table(title="groundtrace metrics")
    # identifiers are never cut: the name and threshold columns keep their width, the description wraps
    table.add_column("name", no_wrap=True, min_width=max(len(r.name) for r in rows))
    table.add_column("needs", overflow="fold")
    table.add_column("direction", overflow="fold")
    table.add_column("threshold", no_wrap=True)
    table.add_column("what it measures", ratio=1)
    for row in rows:
        table.add_row(row.name, ", ".join(row.needs), row.direction, f"{row.threshold:g}", row.description)
    out.print(table)


@dataclass(frozen=True)
class MetricInfo:
    """One metric as `groundtrace metrics` lists it (its fields, in this order, are the --json keys)."""

    name: str
    needs: list[str]
    higher_is_better: bool
    threshold: float
    description: str

    @property
    def direction(self) -> str:
        return "higher = grounded" if self.higher_is_better else "higher = hallucinated"
