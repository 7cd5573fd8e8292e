"""What every public-set converter shares: the record shape of ../shared/data, exact spans, source
document ids, the held-out split by source document, and the leak filters.

A converter turns one source's files into records whose ``split`` is still open; build.py then
drops leaks, splits by ``meta.source_id`` and writes the files.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from groundtrace.text import split_sentences
from training.synth_sources import normalise  # the synthetic set's leak filter normalises texts this way

TASKS = frozenset({"summary", "dialogue", "long_answer", "claim"})
LONG_SENTENCE = 40  # characters: a shared sentence this long is a leak, shorter ones are commonplace
BOILERPLATE_SOURCES = 20  # a sentence in more source documents than this is page furniture, not content


class SpanMismatch(ValueError):
    """A span's offsets do not select its text in the answer."""


def source_key(text: str) -> str:
    """A short stable id for a source document: the hash of its whitespace-normalised text."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def span(answer: str, start: int, end: int, kind: str) -> dict:
    """A span of ``answer`` (end exclusive), its text copied from the answer itself."""
    if not 0 <= start < end <= len(answer):
        raise SpanMismatch(f"span [{start}, {end}) outside an answer of {len(answer)} characters")
    return {"start": start, "end": end, "text": answer[start:end], "type": kind}


def join_sentences(sentences: list[str], flagged: list[bool], kind: str) -> tuple[str, list[dict]]:
    """The sentences joined by single spaces, and a span over each flagged sentence."""
    parts: list[str] = []
    spans: list[dict] = []
    offset = 0
    for sentence, flag in zip(sentences, flagged, strict=True):
        if parts:
            offset += 1
        parts.append(sentence)
        if flag:
            spans.append({"start": offset, "end": offset + len(sentence), "text": sentence, "type": kind})
        offset += len(sentence)
    return " ".join(parts), spans


def make_record(*, id: str, task: str, question: str | None, contexts: list[str], answer: str, label: int,
                spans: list[dict], dataset: str, source_id: str, meta: dict) -> dict:
    """A record in the shape of ../shared/data; its split is decided later, by source document."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}")
    if label not in (0, 1):
        raise ValueError(f"label must be 0 or 1, got {label!r}")
    if spans and label != 1:
        raise ValueError(f"{id}: a faithful record cannot carry unsupported spans")
    for s in spans:
        if answer[s["start"]:s["end"]] != s["text"]:
            raise SpanMismatch(f"{id}: answer[{s['start']}:{s['end']}] != {s['text']!r}")
    return {"id": id, "task": task, "language": "en", "question": question or None, "contexts": contexts,
            "answer": answer, "label": label, "spans": spans, "dataset": dataset, "split": None,
            "meta": {"source_id": source_id, **meta}}


def drop_duplicates(records: list[dict]) -> tuple[list[dict], int, int]:
    """Records with the same question, contexts and answer kept once: once when their labels agree,
    never when they disagree (annotators or models gave the same text two verdicts).
    Returns the kept records, the repeats dropped and the records dropped for disagreeing."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["question"], tuple(r["contexts"]), r["answer"]), []).append(r)
    kept, repeats, conflicting = [], 0, 0
    for group in groups.values():
        if len({r["label"] for r in group}) > 1:
            conflicting += len(group)
            continue
        kept.append(group[0])
        repeats += len(group) - 1
    order = {id(r): i for i, r in enumerate(records)}
    return sorted(kept, key=lambda r: order[id(r)]), repeats, conflicting


# ------------------------------------------------------------------------------------------- split


@functools.lru_cache(maxsize=None)
def long_sentences(text: str) -> frozenset[str]:
    """The text's sentences of LONG_SENTENCE characters or more, whitespace-normalised, and the whole
    text if that long. Split line by line: a line break ends a sentence anyway, and split_sentences
    slows down with the length of what it is given (cached: a text is asked about several times)."""
    found: set[str] = set()
    for line in text.splitlines():
        found.update(s.text for s in split_sentences(normalise(line)) if len(s.text) >= LONG_SENTENCE)
    whole = normalise(text)
    if len(whole) >= LONG_SENTENCE:
        found.add(whole)
    return frozenset(found)


def _texts(record: dict) -> list[str]:
    return [*record["contexts"], record["answer"]]


def source_groups(records: list[dict], boilerplate: int = BOILERPLATE_SOURCES) -> dict[str, str]:
    """Each source id -> its group: the sources linked, directly or through others, by a shared long
    sentence of a context or an answer (the same knowledge paragraph in two dialogue sets, the same
    page cited by two claims, two excerpts of one meeting). A sentence found in more than
    ``boilerplate`` sources is page furniture (web-archive notices, newsletter sign-ups) and links
    nothing. The group id is its smallest source id."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owners: dict[str, set[str]] = {}
    for r in records:
        sid = r["meta"]["source_id"]
        root(sid)
        for text in _texts(r):
            for sentence in long_sentences(text):
                owners.setdefault(sentence, set()).add(sid)
    for sources in owners.values():
        if 1 < len(sources) <= boilerplate:
            first, *rest = sorted(sources)
            for other in rest:
                a, b = root(first), root(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {sid: root(sid) for sid in parent}


def _rank(seed: int, unit: str) -> str:
    return hashlib.sha1(f"{seed}:{unit}".encode()).hexdigest()


def held_out_groups(records: list[dict], *, decided: dict[str, bool] | None = None, seed: int = 0,
                    fraction: float = 0.2, min_records: int = 150, max_fraction: float = 0.35,
                    stratum: Callable[[dict], str] = lambda r: "",
                    counted: Callable[[dict], bool] = lambda r: True) -> set[str]:
    """Source groups (``meta.source_group``) to hold out: ``fraction`` of each stratum's groups (at
    least one), chosen in the order of a seeded hash of the group id, so the choice is deterministic
    and independent of record order; then more groups, in that order, until the held-out part has
    ``min_records`` records (of those ``counted``) or ``max_fraction`` of the groups. Groups another
    set already placed (``decided``: group -> held out?) stay where they are; ``decided`` is updated
    with this set's."""
    decided = {} if decided is None else decided
    size: dict[str, int] = {}
    strata: dict[str, list[str]] = {}
    for r in records:
        group = r["meta"]["source_group"]
        if group not in size:
            strata.setdefault(stratum(r), []).append(group)
        size[group] = size.get(group, 0) + counted(r)
    held = {g for g in size if decided.get(g) is True}
    free = sorted((g for g in size if g not in decided), key=lambda g: _rank(seed, g))
    for groups in strata.values():
        target = max(1, round(fraction * len(groups))) - sum(g in held for g in groups)
        members = set(groups)
        held.update([g for g in free if g in members][:max(0, target)])
    cap = math.floor(max_fraction * len(size))
    for group in free:
        if sum(size[g] for g in held) >= min_records or len(held) >= cap:
            break
        held.add(group)
    decided.update({g: g in held for g in size})
    return held


def assign_split(records: list[dict], held: set[str]) -> None:
    for r in records:
        r["split"] = "heldout" if r["meta"]["source_group"] in held else "train"


# -------------------------------------------------------------------------------------------- leaks


@dataclass
class TextIndex:
    """Long sentences (and whole long texts), for asking whether a record shares any of them."""

    pieces: set[str]

    @classmethod
    def of(cls, texts: Iterable[str]) -> TextIndex:
        pieces: set[str] = set()
        for text in set(texts):
            pieces |= long_sentences(text)
        return cls(pieces)

    def shares(self, record: dict, cache: dict[str, bool]) -> bool:
        """Whether a context or the answer shares a long sentence with a text here, or equals one."""
        for text in _texts(record):
            if text not in cache:
                cache[text] = not self.pieces.isdisjoint(long_sentences(text))
            if cache[text]:
                return True
        return False


def record_texts(records: Iterable[dict]) -> Iterable[str]:
    for r in records:
        yield from _texts(r)


def drop_sharing(records: list[dict], index: TextIndex) -> tuple[list[dict], int]:
    """The records that share nothing with ``index``, and how many were dropped."""
    cache: dict[str, bool] = {}
    kept = [r for r in records if not index.shares(r, cache)]
    return kept, len(records) - len(kept)


# ------------------------------------------------------------------------------------------ sources


@dataclass
class Conversion:
    """A converter's records, and what it left out and why (counts)."""

    records: list[dict]
    excluded: dict[str, int]


@dataclass(frozen=True)
class PublicSet:
    """One public repository: where it is, its licence as its files state it, and whether that
    licence lets us train on it (otherwise every record is held out, for measurement only)."""

    name: str
    repo: str
    commit: str
    licence: str
    trainable: bool
    licence_note: str
    convert: Callable[[Callable[[str], str]], Conversion]
    stratum: Callable[[dict], str] = lambda r: ""
