"""What of the user's own text leaves the process: the mask, and ``capture_text``.

- The **mask** (``mask=`` on the Monitor, the integrations, the Evaluator and the backfill, or
  ``GROUNDTRACE_MASK=module:function``) is a function ``str -> str`` applied once to the question,
  the derived queries, every context, the answer and the reference when a Record is taken in,
  before any metric, judge or sink sees it: what is scored is what is written, so span offsets
  point into the masked answer.
  A mask that raises (or returns something that is not a string) leaves the record unscored: its
  metrics give error Scores and none of its text goes anywhere.
- **capture_text** off (``GROUNDTRACE_CAPTURE_TEXT=false``): sinks get the Scores' values,
  verdicts, thresholds and span offsets, never text (:func:`without_text`).

Secrets in the texts groundtrace composes itself are :mod:`groundtrace.redaction`'s job.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from groundtrace.errors import ConfigError
from groundtrace.record import InvalidInput, InvalidRecord, Record, clean_text, coerce_record
from groundtrace.score import Score

Mask = Callable[[str], str]
#: fields of a Record that hold the user's text; the mask covers them all
TEXT_FIELDS = ("question", "answer", "reference")
#: fields that hold lists of the user's text (the derived queries, the contexts)
LIST_FIELDS = ("queries", "contexts")


class MaskError(ValueError):
    """The mask failed on a record. The message names the exception's type only: its own message
    could quote the very text the mask was to hide."""


def load_mask(spec: str | Mask | None) -> Mask | None:
    """A mask from a callable, or from ``module:function`` (``GROUNDTRACE_MASK``); None stays None."""
    if spec is None or callable(spec):
        return spec
    module, _, attribute = str(spec).strip().partition(":")
    if not module or not attribute:
        raise ConfigError(f"a mask is named as module:function (GROUNDTRACE_MASK), got {spec!r}")
    try:
        found: Any = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"the mask {spec!r} cannot be loaded: {error}") from None
    if not callable(found):
        raise ConfigError(f"the mask {spec!r} is a {type(found).__name__}, not a function")
    return found


def mask_reference(mask: str | Mask | None) -> str | None:
    """The ``module:function`` under which another process loads this very mask (:func:`load_mask`),
    or None when there is none: a lambda, a closure, a bound method, a function of ``__main__``
    (a scoring process has another ``__main__``). A name given as a string is its own reference."""
    if mask is None or isinstance(mask, str):
        return mask.strip() if isinstance(mask, str) else None
    module, name = getattr(mask, "__module__", None), getattr(mask, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str) or module == "__main__" or "<" in name:
        return None
    reference = f"{module}:{name}"
    try:
        return reference if load_mask(reference) is mask else None
    except ValueError:
        return None


def chain_masks(*masks: Mask | None) -> Mask | None:
    """One mask that applies each given one in turn (None when none is given)."""
    chosen = [mask for mask in dict.fromkeys(masks) if mask is not None]
    if len(chosen) <= 1:
        return chosen[0] if chosen else None

    def chained(text: str) -> str:
        for mask in chosen:
            text = mask(text)
        return text

    return chained


def _masked(mask: Mask, text: str) -> str:
    result = mask(text)
    if not isinstance(result, str):
        raise TypeError(f"the mask returned a {type(result).__name__}, not a str")
    return clean_text(result)


def apply_mask(record: Record, mask: Mask | None) -> Record:
    """``record`` with its question, queries, contexts, answer and reference masked; raises MaskError."""
    if mask is None:
        return record
    try:
        update: dict[str, Any] = {name: _masked(mask, getattr(record, name)) for name in TEXT_FIELDS
                                  if getattr(record, name) is not None}
        for name in LIST_FIELDS:
            if getattr(record, name) is not None:
                update[name] = [_masked(mask, text) for text in getattr(record, name)]
    except Exception as error:
        raise MaskError(f"the mask raised {type(error).__name__} (its message is not shown: it may quote the "
                        "text); nothing of this record was scored or sent") from None
    return record.model_copy(update=update)


def take_in(item: Any, mask: Mask | None) -> Any:
    """A batch input with the mask applied: the masked Record of a good one; an InvalidInput for a
    record the mask failed on (every engine turns it into error Scores and an id-only row, and no
    sink can attach that to a trace); an input that is no record at all as it is, so that its error
    is the usual one."""
    if mask is None:
        return item
    try:
        record = coerce_record(item)
    except InvalidRecord:
        return item
    try:
        return apply_mask(record, mask)
    except MaskError as error:
        return InvalidInput(id=record.id, message=str(error))


def masked_items(items: Iterable[Any], mask: Mask | None) -> Iterator[Any]:
    """:func:`take_in` of every input, lazily."""
    return iter(items) if mask is None else (take_in(item, mask) for item in items)


# ---------------------------------------------------------------------------- capture_text off
def _numbers_only(value: Any) -> Any:
    """Numbers, flags and the containers of them; every string (which may quote the text) dropped."""
    if isinstance(value, Mapping):
        kept = {key: _numbers_only(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item is not _DROP}
    if isinstance(value, (list, tuple)):
        return [item for item in map(_numbers_only, value) if item is not _DROP]
    return value if value is None or isinstance(value, (bool, int, float)) else _DROP


_DROP = object()


def text_free_record(record: Record) -> Record:
    """The ids that name the record's trace, and nothing the user wrote or retrieved."""
    return Record(id=record.id, language=record.language, trace_id=record.trace_id, span_id=record.span_id,
                  run_id=record.run_id, session_id=record.session_id, trace_links=dict(record.trace_links))


def text_free_score(score: Score) -> Score:
    """Value, verdict, threshold, span offsets, latency, cost and error, with no text: no reason
    (reasons quote the answer), spans without their text, details without strings."""
    return score.model_copy(update={
        "reason": "",
        "spans": [span.model_copy(update={"text": ""}) for span in score.spans],
        "details": _numbers_only(score.details),
    })


def without_text(record: Record, scores: list[Score]) -> tuple[Record, list[Score]]:
    return text_free_record(record), [text_free_score(score) for score in scores]


__all__ = ["Mask", "MaskError", "apply_mask", "chain_masks", "load_mask", "mask_reference", "masked_items", "take_in",
           "text_free_record", "text_free_score", "without_text"]
