"""The context passages that a metric names, as marks on the contexts.

Metrics say which passages they used in their own details, each in its own shape; each reader below
knows one shape. A metric whose details name no passage marks nothing: the report shows support
where a metric claims it and never guesses. New metrics can opt in with ``supporting_contexts``: a
list of context indices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from groundtrace.report.segments import Mark
from groundtrace.score import Score

# A passage is (the text to find in the contexts, or None with an index for a whole context), label,
# probability, reason.
Named = tuple[str | None, int | None, str, float | None, str]


def _relevant_sentences(details: dict[str, Any]) -> Iterator[Named]:
    # context_relevance: the context sentences the judge found relevant, verbatim
    for sentence in details.get("relevant_sentences") or ():
        if isinstance(sentence, str):
            yield sentence, None, "relevant", None, ""


def _contradicted_contexts(details: dict[str, Any]) -> Iterator[Named]:
    # hallucination: one verdict per context statement; only a contradiction names a passage,
    # "not contradicted" does not mean "supporting"
    for item in details.get("contexts") or ():
        if isinstance(item, dict) and isinstance(item.get("statement"), str) and (item.get("contradicted") or 0) >= 0.5:
            yield item["statement"], None, "contradicted", float(item["contradicted"]), str(item.get("reason") or "")


def _supporting_contexts(details: dict[str, Any]) -> Iterator[Named]:
    for index in details.get("supporting_contexts") or ():
        if isinstance(index, int) and not isinstance(index, bool):
            yield None, index, "supporting", None, ""


def _matched_facts(details: dict[str, Any]) -> Iterator[Named]:
    # facts: the answer's numbers, dates and names that the contexts hold (those it did not call
    # hallucinated), where a context states them in the same words
    missing = set(details.get("hallucinated_facts") or ())
    for fact in dict.fromkeys(details.get("answer_facts") or ()):
        if isinstance(fact, str) and fact not in missing:
            yield fact, None, "matched fact", None, ""


READERS = (_relevant_sentences, _contradicted_contexts, _supporting_contexts, _matched_facts)


def context_marks(contexts: Sequence[str], scores: Sequence[Score]) -> list[list[Mark]]:
    """One list of marks per context."""
    marks: list[list[Mark]] = [[] for _ in contexts]
    for score in scores:
        for read in READERS:
            for text, index, label, p, reason in read(score.details):
                for i, start, end in _places(contexts, text, index):
                    marks[i].append(Mark(start, end, score.metric, label, p, reason))
    return marks


def _places(contexts: Sequence[str], text: str | None, index: int | None) -> Iterator[tuple[int, int, int]]:
    if index is not None:
        if 0 <= index < len(contexts):
            yield index, 0, len(contexts[index])
        return
    needle = (text or "").strip()
    if not needle:
        return
    for i, context in enumerate(contexts):  # the first place in each context that holds it
        start = context.find(needle)
        while start >= 0 and _inside_number(context, start, start + len(needle)):
            start = context.find(needle, start + 1)
        if start >= 0:
            yield i, start, start + len(needle)


def _inside_number(text: str, start: int, end: int) -> bool:
    """A number found as part of a longer one: "5" in "15" or "1.5" is not the fact 5."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    return (text[start].isdigit() and (before.isdigit() or (before in ".," and text[start - 2:start - 1].isdigit()))) \
        or (text[end - 1].isdigit() and (after.isdigit() or (after in ".," and text[end + 1:end + 2].isdigit())))
