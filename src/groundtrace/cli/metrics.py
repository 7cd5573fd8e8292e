"""`groundtrace metrics`: the metrics, what each needs, its direction and its threshold; `--check` runs the
detector's numerics check on this CPU."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Annotated

import typer
from rich.table import Table

from groundtrace.cli.common import out


def metrics_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per metric, as a list.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Run the grounding detector on its check windows here and compare it with its float64 "
                        "reference within the model card's tolerance (exit 1 beyond it).")] = False,
) -> None:
    """List the metrics, what each needs, its direction and the threshold it uses."""
    from groundtrace.metrics import metric_class, metric_names

    if check:
        raise typer.Exit(check_numerics())
    rows = []
    for name in metric_names():
        cls = metric_class(name)
        tolerance, measured_on = cls.numerics() or (None, [])
        rows.append(MetricInfo(name, list(cls.requires), cls.higher_is_better, cls.documented_threshold(),
                               cls.description, tolerance, measured_on))
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
    for row in rows:
        if row.tolerance is not None:
            out.print(f"{row.name}: the same values on every CPU within ±{row.tolerance:g} (measured on "
                      f"{'; '.join(row.measured_on)}); `groundtrace metrics --check` checks this one.",
                      markup=False, highlight=False)


def check_numerics() -> int:
    """The detector's check here: one line, exit code 0 within the tolerance, 1 beyond it."""
    from groundtrace.detector.numerics import check
    from groundtrace.metrics import metric_class

    stated = metric_class("grounding").numerics()
    assert stated is not None  # the trained detector states its tolerance in its card
    tolerance = stated[0]
    result = check(tolerance)
    verdict = "within" if result.ok else "BEYOND"
    out.print(f"grounding on {result.instruction_set}: {result.windows} check windows, {result.positions} positions, "
              f"largest difference from the float64 reference {result.max_difference:.2g}, {verdict} the tolerance "
              f"{result.tolerance:g}", markup=False, highlight=False)
    return 0 if result.ok else 1


@dataclass(frozen=True)
class MetricInfo:
    """One metric as `groundtrace metrics` lists it (its fields, in this order, are the --json keys)."""

    name: str
    needs: list[str]
    higher_is_better: bool
    threshold: float
    description: str
    tolerance: float | None  # how far its values may differ between CPUs, where the metric states it
    measured_on: list[str]  # the instruction sets that tolerance was measured on

    @property
    def direction(self) -> str:
        return "higher = grounded" if self.higher_is_better else "higher = hallucinated"
