"""`groundtrace synth-hallucinations`: labelled data from a judge model playing the Braintrust
seed's "hallucinating assistant".

For each (question, contexts, answer) record the model rewrites the answer with one hallucination
of a style picked per record (a wrong number, a swapped entity, an unsupported addition, a
reversed fact), and lists its changes as verbatim excerpts, which become the row's spans. Rows are
written in the shared data format (``label`` 1, ``spans`` with offsets into the new answer,
``meta.source_id`` naming the original); ``include_originals`` writes each original too, with its
own label (0 when it has none). A rewrite identical to the original is dropped, not mislabelled.

It stays in the core, beside the command that runs it (the training code is not installed), and
uses public APIs only: the judge client, ``render_prompt`` of the judge metrics, ``text.spans``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from groundtrace.backends.judge import JudgeClient, JudgeError
from groundtrace.metrics.judged import render_prompt
from groundtrace.record import InvalidInput
from groundtrace.text.lang import guess_language
from groundtrace.text.spans import locate, normalised_text

STYLES = (
    "change one number, date or quantity so that it contradicts the context",
    "replace one name, place or organisation with a plausible but wrong one",
    "add one plausible detail that the context does not support",
    "reverse or negate one fact that the context states",
)


class Change(BaseModel):
    kind: Literal["contradiction", "unsupported"]
    excerpt: str = Field(description="the changed words, verbatim from the rewritten answer")


class HallucinatedAnswer(BaseModel):
    answer: str
    changes: list[Change] = Field(max_length=10)


@dataclass
class SynthStats:
    read: int = 0
    written: int = 0
    originals: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def style_for(record_id: str, seed: int = 0) -> str:
    """The hallucination style of a record: fixed by its id and the seed, spread evenly."""
    digest = hashlib.sha256(f"{seed}:{record_id}".encode()).digest()
    return STYLES[digest[0] % len(STYLES)]


def hallucinate(client: JudgeClient, row: Mapping[str, Any], *, seed: int = 0, temperature: float = 0.7) -> dict[str, Any] | None:
    """The labelled hallucinated row made from ``row``, or None when the model changed nothing.
    Raises JudgeError."""
    answer, contexts = row["answer"], [c for c in row["contexts"] if c.strip()]
    language = row.get("language") or guess_language(answer)
    style = style_for(str(row.get("id")), seed)
    messages = render_prompt("synth_hallucination", {"question": row.get("question"), "contexts": contexts, "answer": answer},
                            language=language, params={"style": style})
    made = client.complete(messages, HallucinatedAnswer, temperature=temperature, seed=seed).value
    new = made.answer.strip()
    if not new or normalised_text(new) == normalised_text(answer):
        return None
    spans = []
    for change in made.changes:
        where = locate(new, change.excerpt)
        if where is not None:
            spans.append({"start": where[0], "end": where[1], "text": new[where[0]:where[1]], "type": change.kind})
    return {
        "id": f"{row.get('id')}:synth", "task": row.get("task") or "qa", "language": language,
        "question": row.get("question"), "contexts": contexts, "answer": new, "label": 1, "spans": spans,
        "dataset": f"synth:{row.get('dataset') or 'unknown'}", "split": row.get("split") or "synthetic",
        "meta": {"source_id": row.get("id"), "kind": "synth-hallucination", "style": style, "judge_model": client.model,
                 "changes": [c.model_dump() for c in made.changes], "seed": seed},
    }


def synthesize(
    rows: Iterable[Mapping[str, Any] | InvalidInput],
    client: JudgeClient,
    *,
    include_originals: bool = False,
    workers: int = 2,
    seed: int = 0,
    temperature: float = 0.7,
    stats: SynthStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows to write, in input order; ``stats`` counts what happened to every input."""
    stats = stats if stats is not None else SynthStats()

    def one(row: Mapping[str, Any] | InvalidInput) -> list[dict[str, Any]]:
        if isinstance(row, InvalidInput) or not row.get("answer") or not any((c or "").strip() for c in row.get("contexts") or []):
            stats.skipped += 1
            return []
        out = []
        if include_originals:
            out.append({**row, "label": int(row.get("label") or 0), "spans": row.get("spans") or []})
            stats.originals += 1
        try:
            made = hallucinate(client, row, seed=seed, temperature=temperature)
        except JudgeError as error:
            stats.failed += 1
            if len(stats.errors) < 5:
                stats.errors.append(f"{row.get('id')}: {error}")
            return out
        if made is None:
            stats.unchanged += 1
        else:
            out.append(made)
            stats.written += 1
        return out

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="groundtrace-synth") as pool:
        for rows_out in pool.map(one, _counted(rows, stats)):
            yield from rows_out


def _counted(rows: Iterable[Any], stats: SynthStats) -> Iterator[Any]:
    for row in rows:
        stats.read += 1
        yield row
