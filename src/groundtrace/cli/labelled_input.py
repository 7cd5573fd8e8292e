"""Where `fit` and `bench` read labelled records: a labelled file, a file and a review labels file
(--labels), or a platform's records with its human labels (--from, --label-name) or a labels file."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from groundtrace.cli.common import existing_store, json_or_text, option_group

if TYPE_CHECKING:
    from groundtrace.io.labelled import LabelCount, Labelled
    from groundtrace.score import Score

FromOption = Annotated[Optional[str], typer.Option(
    "--from", help="Read the records from a platform instead of a file: langsmith:PROJECT, langfuse[:PROJECT], "
                   "phoenix:PROJECT or mlflow:EXPERIMENT (as `score --from`), labelled by --label-name or --labels.")]
LabelsOption = Annotated[Optional[Path], typer.Option(
    "--labels", help="A `groundtrace review` labels file, joined with the records by id (the records then need no "
                     "label field; skipped and unlabelled records are left out and counted).")]
LabelNameOption = Annotated[Optional[str], typer.Option(
    "--label-name", help="With --from: the name of the human label to read (LangSmith feedback key, Langfuse "
                         "annotation score, Phoenix human annotation, MLflow human assessment), e.g. correctness.")]
LabelMapOption = Annotated[Optional[str], typer.Option(
    "--label-map", help="With --label-name: categories as VALUE=unsupported|supported, comma-separated, over the "
                        "defaults (e.g. \"bad=unsupported,good=supported\"; true=supported, correct, pass, yes ... "
                        "are supported; false=unsupported, incorrect, fail, no ... unsupported).")]
BelowOption = Annotated[Optional[float], typer.Option(
    "--label-unsupported-below", help="With --label-name: numbers below this are unsupported (default 0.5, for "
                                      "numbers in [0, 1]).")]
AboveOption = Annotated[Optional[float], typer.Option(
    "--label-unsupported-above", help="With --label-name: numbers above this are unsupported (a label where higher "
                                      "means worse, e.g. a hallucination rate), instead of --label-unsupported-below.")]
RescoreOption = Annotated[bool, typer.Option(
    "--rescore", help="Score every record here, even where the file (a scores file: the default store, "
                      "`score -o` output) holds the metric's score already.")]
SourceOptionOption = Annotated[Optional[list[str]], typer.Option(
    "--source-option", "-S", help="With --from: a source option as KEY=VALUE, e.g. tracking_uri=... (mlflow) or "
                                  "page_size=500 (repeatable).")]


#: the options that name labelled records besides the file (bench and fit): one ``labelled`` dict for read_labelled
with_labelled_input = option_group("labelled", (
    ("source", FromOption, None), ("labels", LabelsOption, None), ("label_name", LabelNameOption, None),
    ("label_map", LabelMapOption, None), ("label_below", BelowOption, None), ("label_above", AboveOption, None),
    ("source_option", SourceOptionOption, None)))


@dataclass
class LabelledInput:
    items: list[Labelled]
    name: str  # the file's name, or the source's spec: what the figures are of
    path: Path | None  # the records' file (None: a platform)
    count: LabelCount | None  # what a join kept and left out (None: labels in the file)
    #: the Scores a scores file holds that a bench or fit reuses, record id -> metric -> Score (io.labelled.stored_scores)
    stored: dict[str, dict[str, Score]] | None = None


def read_labelled(input_path: Path | None, source: str | None = None, labels: Path | None = None,
                  label_name: str | None = None, label_map: str | None = None, label_below: float | None = None,
                  label_above: float | None = None, source_option: Sequence[str] | None = None, *,
                  limit: int | None, schema: str | None, by: Sequence[str] = (), options: Container[str] = (),
                  rescore: bool = False) -> LabelledInput:
    """The labelled records the options name. Raises ValueError (a usage error, a value no label maps),
    FileNotFoundError, KeyError (an unknown source) or the source's own errors."""
    from groundtrace.io import is_scores_file
    from groundtrace.io.label_values import LabelMap
    from groundtrace.io.labelled import labelled_from_file, labelled_from_source, load_labelled, stored_scores
    from groundtrace.io.labels import labels_path_for

    if input_path is not None and source is not None:
        raise ValueError("give a file of records or --from SOURCE (one of the two)")
    if input_path is None and source is None:
        input_path = existing_store()
    platform_only = [flag for flag, value in (("--label-name", label_name), ("--label-map", label_map),
                                               ("--label-unsupported-below", label_below),
                                               ("--label-unsupported-above", label_above),
                                               ("--source-option", source_option)) if value is not None]
    if source is None:
        if platform_only:
            raise ValueError(f"{platform_only[0]} reads a platform's labels: it goes with --from SOURCE")
        assert input_path is not None
        stored = stored_scores(input_path, options, rescore)
        if labels is None and labels_path_for(input_path).exists() and is_scores_file(input_path):
            labels = labels_path_for(input_path)  # where `groundtrace review` wrote them
        if labels is None:
            return LabelledInput(load_labelled(input_path, limit=limit, schema=schema, by=by), input_path.name,
                                 input_path, None, stored)
        items, count = labelled_from_file(input_path, labels, limit=limit, schema=schema, by=by)
        return LabelledInput(items, input_path.name, input_path, count, stored)
    if schema is not None:
        raise ValueError("--schema is the layout of a file; a --from source has its own")
    if labels is not None and any(value is not None for value in (label_name, label_map, label_below, label_above)):
        raise ValueError("--labels gives the labels: --label-name and its mapping options read a platform's instead")
    mapping = LabelMap.parse(label_map, label_below, label_above) if label_name is not None else None
    items, count = labelled_from_source(source, label_name=label_name, label_map=mapping, labels_path=labels,
                                        limit=limit, by=by, source_options=source_options(source_option))
    return LabelledInput(items, source, None, count)


def source_options(pairs: Sequence[str] | None) -> dict[str, Any]:
    """'page_size=500' -> {'page_size': 500}; values are JSON where they parse as JSON."""
    found: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--source-option {pair!r} is not KEY=VALUE")
        found[key.strip()] = json_or_text(value.strip())
    return found
