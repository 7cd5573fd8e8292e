"""`groundtrace fit`: one calibrated verdict fitted on the user's labelled answers (groundtrace.combine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from groundtrace._extras import require_extra
from groundtrace.backends.verdict import VerdictFileError
from groundtrace.cli.common import OptionsOption, SchemaOption, console, fmt, metric_names, out, parse_options, progress_bar, shown
from groundtrace.cli.labelled_input import RescoreOption, read_labelled, with_labelled_input

DEFAULT_COMPONENTS = ["grounding", "lexical", "facts"]
DEFAULT_OUT = Path("groundtrace-verdict.json")
# fit's own: with none named it combines the offline signals, not the scoring default
FitMetricsOption = Annotated[
    Optional[list[str]],
    typer.Option("--metrics", "-m", callback=metric_names,
                 help=f"The metrics the verdict combines, comma-separated or repeated (-m grounding -m facts); none: "
                      f"{', '.join(DEFAULT_COMPONENTS)}."),
]


@with_labelled_input
def fit_command(
    input_path: Annotated[Optional[Path], typer.Argument(help="Labelled records (label 1 = unsupported; JSONL, CSV or Parquet, any layout `score` reads), or records (a scores file too: its scores are reused) and --labels FILE. Or use --from. Default: the default store of live capture, with the labels `groundtrace review` wrote beside it.")] = None,
    labelled: dict[str, Any] | None = None,  # --from, --labels, --label-name, ... (with_labelled_input)
    metrics: FitMetricsOption = None,
    target: Annotated[str, typer.Option(help="What the threshold is chosen for: balanced_accuracy (default: it does not move with the share of unsupported answers), mcc, f1, cost=FN:FP (e.g. cost=5:1: a missed unsupported answer costs 5 false flags), precision>=P, recall>=R or rate=SHARE (the share flagged).")] = "balanced_accuracy",
    output: Annotated[Path, typer.Option("--out", "-o", help="Where to write the verdict file.")] = DEFAULT_OUT,
    scores: Annotated[Optional[Path], typer.Option(help="A `groundtrace score -o` file of the same records: metrics it holds are not scored again (a scores file given as the records is read so by itself).")] = None,
    rescore: RescoreOption = False,
    escalate: Annotated[Optional[str], typer.Option(help="A costly metric (a judge, a Hub detector) for the records the cheap ones are least sure of.")] = None,
    share: Annotated[float, typer.Option(help="With --escalate: the share of records sent to it.")] = 0.2,
    group: Annotated[Optional[str], typer.Option(help="Cross-validation groups (records of a group stay in one fold): a field or a dotted path such as meta.source_id. Default: meta.source_id or session_id where every record has one.")] = None,
    option: OptionsOption = None,
    schema: SchemaOption = None,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N records.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the folds, the bootstrap and the learning curve.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
) -> None:
    """Fit one calibrated verdict from several metrics to your labelled answers: the `combined` metric reads the file."""
    import numpy as np

    from groundtrace.combine.fitting import Target, fit
    from groundtrace.combine.labels import fit_inputs, metric_scores
    from groundtrace.io import read_scored
    from groundtrace.score import scores_by_id
    from groundtrace.measure.provenance import records_sha256

    names = metrics or DEFAULT_COMPONENTS
    try:
        require_extra("fit", "groundtrace fit", "sklearn")  # before the labels are read and scored, not after
        goal = Target.parse(target)
        if not 0.0 < share < 1.0:
            raise ValueError(f"--share {share}: a share in (0, 1)")
        options = parse_options(option)
        read = read_labelled(input_path, **(labelled or {}), limit=limit, schema=schema, options=options,
                             rescore=rescore)
        items = read.items
        if read.count is not None:  # what the join left out, before the fit refuses too few
            (console if as_json else out).print(read.count.line(), markup=False, soft_wrap=True)
        with progress_bar() as progress:
            def tick(name: str, total: int):
                task = progress.add_task(name, total=total)
                return lambda: progress.advance(task)

            # a scores file's own scores are reused: only what it lacks is scored here
            scored = scores_by_id(read_scored(scores)) if scores is not None else read.stored
            found = metric_scores(items, [*names, *([escalate] if escalate else [])], options, scored, tick)
        costly = found.pop(escalate) if escalate else None
        inputs = fit_inputs(items, found, group)
        costly_values = None
        if escalate and costly is not None:
            costly_values = (escalate, np.array([s.hallucination_score if s.ok else np.nan for s in costly], dtype=float))
        result = fit(inputs.values, inputs.labels, inputs.languages, inputs.groups, names, goal,
                     options=[options.get(name, {}) for name in names], costly=costly_values, share=share,
                     costly_options=options.get(escalate or "", {}), seed=seed)
    except (KeyError, ValueError, FileNotFoundError, ImportError, RuntimeError) as error:  # ImportError: an extra; RuntimeError: a platform
        console.print(f"[red]error:[/red] {shown(error)}", soft_wrap=True)
        raise typer.Exit(2) from None
    verdict = result.verdict
    fitted = {**verdict.fitted, "file": read.name, "target": str(goal), "seed": seed,
              "trained_on": [{"name": read.name, "sha256": records_sha256(i.raw for i in items)}]}
    if costly is not None:
        fitted["escalation_cost"] = _cost(costly)
    final = type(verdict)(components=verdict.components, model=verdict.model, threshold=verdict.threshold,
                          target=verdict.target, cascade=verdict.cascade, fitted=fitted, report=result.report())
    try:
        final.save(output)  # a temporary file renamed into place: a full disk leaves the old verdict whole
    except VerdictFileError as error:
        console.print(f"[red]error:[/red] {shown(error)}", soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({"file": str(output), "threshold": final.threshold, **result.report()}, indent=2))
        for warning in result.warnings:  # beside the JSON (which holds them too): stdout stays one JSON object
            console.print(f"warning: {warning}", style="yellow", markup=False, soft_wrap=True)
        return
    _print(result, final, output)


def _print(result: Any, verdict: Any, output: Path) -> None:
    n, positives = verdict.fitted["records"], verdict.fitted["labelled_1"]
    table = Table(title=f"fit: {n} records, {positives} labelled 1; out of fold, at the {verdict.target} threshold "
                        f"(90% bootstrap intervals)")
    for column in ("scorer", "AUC", "F1", "precision", "recall", "bal. acc.", "MCC", "calibration error", "flagged"):
        table.add_column(column, justify="left" if column == "scorer" else "right")
    for m in [result.combined, *result.alone]:
        table.add_row("combined" if m is result.combined else f"{m.name} alone",
                      *(_with_interval(m, key) for key in ("auc", "f1", "precision", "recall", "balanced_accuracy", "mcc",
                                                                           "calibration_error")),
                      fmt(m.point["flagged_rate"], 2))
    out.print(table)
    curve = ", ".join(f"{row['labels']}: {fmt(row['auc_mean'])}" + (f" (worst 5% {fmt(row['auc_p5'])})" if row.get("auc_p5") is not None else "")
                      for row in result.learning_curve)
    out.print(f"learning curve, ROC AUC of the combination by labels fitted on: {curve}")
    out.print(f"a stable fit needed about {result.stable_at} labels" if result.stable_at and result.stable_at < n
              else "the fit was still improving with every label: more labels would help")
    for row in result.cascade_curve:
        out.print(f"escalating {row['share']:.0%} ({row['escalated']} records): F1 {row['f1']:.3f}, precision "
                  f"{row['precision']:.3f}, recall {row['recall']:.3f}")
    if verdict.cascade is not None:
        cost = verdict.fitted.get("escalation_cost") or {}
        out.print(f"cascade: records with a combined probability in [{verdict.cascade.low:.3f}, {verdict.cascade.high:.3f}) "
                  f"go to {verdict.cascade.metric} ({verdict.cascade.share:.0%} of these records)"
                  + (f"; it cost {cost['ms_per_record']:.0f} ms" if cost.get("ms_per_record") is not None else "")
                  + (f" and ${cost['usd_per_record']:.5f} a record" if cost.get("usd_per_record") is not None else "")
                  + _expected(cost, verdict.cascade.share))
    for warning in result.warnings:
        out.print(f"[yellow]warning:[/yellow] {shown(warning)}", soft_wrap=True)
    out.print(f"wrote {output} (threshold {verdict.threshold:.4f}). Use it: groundtrace score FILE -m combined "
              f"-O combined.file={output}, or GROUNDTRACE_VERDICT_FILE={output} for the Monitor", soft_wrap=True)


def _expected(cost: dict[str, Any], share: float | None) -> str:
    """What escalating ``share`` of the records costs, on average over every record."""
    if not share:
        return ""
    parts = []
    if cost.get("usd_per_record") is not None:
        parts.append(f"${cost['usd_per_record'] * share * 1000:.2f} per 1,000 records")
    if cost.get("ms_per_record") is not None:
        parts.append(f"{cost['ms_per_record'] * share:.0f} ms a record on average")
    return f"; expected at this share: {' and '.join(parts)}" if parts else ""


def _with_interval(m: Any, key: str) -> str:
    point, interval = m.point.get(key), m.interval.get(key)
    if point is None:
        return "—"
    return fmt(point) + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def _cost(scores: list[Any]) -> dict[str, float | None]:
    ms = [s.latency_ms for s in scores if s.latency_ms is not None]
    usd = [s.cost.usd for s in scores if s.cost is not None and s.cost.usd is not None]
    return {"ms_per_record": sum(ms) / len(ms) if ms else None, "usd_per_record": sum(usd) / len(scores) if usd else None}
