"""How much text a captured Record may carry, cut where the Record is built.

A retrieved context of 5 MB is a bug upstream, not a passage: the metrics refuse more than a million characters
of contexts anyway, and scoring that much live would take the application's machine. Live capture cuts a
Record to :data:`MAX_CONTEXT_CHARS` of contexts and :data:`MAX_ANSWER_CHARS` of answer where it is built,
before any copy, validation, mask or pipe, so that a huge input costs the application's process a bounded
amount of work and memory: the question and the answer
are cut to their bounds, the contexts are kept in order until their total reaches its bound (the one that
crosses it cut, the rest left out). What was cut is said on the Record, ``metadata["truncated"]``:
``{"answer": {"chars": 5000000, "kept": 20000}, "contexts": {"chars": ..., "kept": ..., "passages": 3,
"kept_passages": 1}}``. Every bound is a slice or a length: O(1) per text, O(passages) in all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the most of the answer, and of the question, a captured Record keeps (a fifth of the metrics' own limit)
MAX_ANSWER_CHARS = 20_000
MAX_QUESTION_CHARS = 20_000
#: the most of the contexts together a captured Record keeps (a fifth of the metrics' own limit: a context of
#: 200,000 characters is some 50 pages; scoring more, in the application's machine, would take its CPU)
MAX_CONTEXT_CHARS = 200_000
#: the most of a model call's input read to choose the contexts (what reached it beyond that is not looked at)
MAX_INPUT_CHARS = MAX_CONTEXT_CHARS + MAX_ANSWER_CHARS


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (a slice: nothing is read)."""
    return text if len(text) <= limit else text[:limit]


CUT_FROM = "cut_from"  # a passage's metadata key: its length before it was cut where it was read


def bounded(question: str | None, answer: str | None, contexts: Sequence[str], chars: int | None = None
            ) -> tuple[str | None, str | None, list[str], dict[str, Any] | None]:
    """The question, answer and contexts within their bounds, and what was cut (None when nothing was).
    ``chars``: the contexts' length before an integration already cut a passage to the bound where it read it
    (they were longer than they are now)."""
    cut: dict[str, Any] = {}
    if question is not None and len(question) > MAX_QUESTION_CHARS:
        cut["question"] = {"chars": len(question), "kept": MAX_QUESTION_CHARS}
        question = question[:MAX_QUESTION_CHARS]
    if answer is not None and len(answer) > MAX_ANSWER_CHARS:
        cut["answer"] = {"chars": len(answer), "kept": MAX_ANSWER_CHARS}
        answer = answer[:MAX_ANSWER_CHARS]
    total = sum(map(len, contexts))
    kept = list(contexts)
    if chars is not None and chars > total:  # cut already where they were read: said as such
        cut["contexts"] = {"chars": chars, "kept": min(total, MAX_CONTEXT_CHARS), "passages": len(contexts),
                           "kept_passages": len(contexts)}
    if total > MAX_CONTEXT_CHARS:
        kept, room = [], MAX_CONTEXT_CHARS
        for text in contexts:
            if room <= 0:
                break
            kept.append(text[:room])
            room -= len(kept[-1])
        cut["contexts"] = {"chars": max(total, chars or 0), "kept": MAX_CONTEXT_CHARS, "passages": len(contexts),
                           "kept_passages": len(kept)}
    return question, answer, kept, cut or None


def oversized(record: Any) -> bool:
    """Whether a Record is over a bound (lengths only)."""
    return (len(record.question or "") > MAX_QUESTION_CHARS or len(record.answer or "") > MAX_ANSWER_CHARS
            or sum(map(len, record.contexts or ())) > MAX_CONTEXT_CHARS)


def bound_record(record: Any) -> Any:
    """A Record within the bounds: itself when it is, else a copy cut to them that says what was cut."""
    if not oversized(record):
        return record
    question, answer, contexts, cut = bounded(record.question, record.answer, record.contexts or [])
    metadata = {**record.metadata, "truncated": cut}
    return record.model_copy(update={"question": question, "answer": answer,
                                     "contexts": contexts if record.contexts is not None else None,
                                     "metadata": metadata})
