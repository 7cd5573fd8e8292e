"""What grounding-5's claim verdict reads of each claim, beyond the cross-encoder: its facts against the contexts
(text/conflicts.py), how much of its content the contexts hold, and whether its closest evidence sentence bounds or
negates what the claim states unconditionally.

    xe                P(unsupported) of the claim from the cross-encoder (its highest word token)
    conflict          1 when a precise rule (text.conflicts.PRECISE) finds a fact in conflict, or a time absent
    absent_number     facts of the claim the contexts neither state nor imply, by kind (at most 2 each)
    absent_date       (years and dates)
    absent_name
    absent_in_copy    those absent facts (at most 2) times the share of the claim's words one sentence holds: a
                      sentence copied from the contexts with one number, date or name changed
    supported         facts of the claim the contexts state in any form (at most 2): "1450 рублей" for "1 450 рублей",
                      where the cross-encoder may read another number
    uncovered         share of the claim's content stems that no context holds (an invented sentence: near 1)
    best_uncovered    1 - the share held by the single context sentence that holds most of them
    dropped_condition that share when that sentence holds a condition or bound word and the claim none, else 0
    negation          that share when the claim and that sentence differ in whether they negate, else 0
    length            log(1 + the claim's content words)
    position          the claim's place in the answer, 0 (first) to 1 (last)

Training (training/claim_verdict.py) featurizes with this same function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from groundtrace.detector.claims import Claim
from groundtrace.text import anchors
from groundtrace.text.conditions import conditions, negations
from groundtrace.text.conflicts import PRECISE, RULES, FactCheck, check_claim
from groundtrace.text.sentences import split_sentences
from groundtrace.text.tokenize import fold

FEATURES = ("xe", "conflict", "absent_number", "absent_date", "absent_name", "absent_in_copy", "supported", "uncovered",
            "best_uncovered", "dropped_condition", "negation", "length", "position")
_ABSENT_KIND = {"absent_number": "absent_number", "absent_year": "absent_date", "absent_date": "absent_date",
                "absent_name": "absent_name"}
_MAX_ABSENT = 2
# Every rule may decide but within_bound, which supports a planted value strictly inside a one-sided bound; the
# imprecise absences are features the verdict weighs, not flags.
_RULES = frozenset(RULES) - {"within_bound"}
# Fact checks compare a claim with every context sentence; a pile beyond this many sentences is read through
# the sentences sharing most of the claim's words (a claim's facts stand beside its words).
MAX_FACT_SENTENCES = 400


@dataclass(frozen=True)
class ClaimFeatures:
    values: dict[str, float]
    conflicts: list[FactCheck] = field(default_factory=list)  # the precise flags: what the reason names
    absent: list[FactCheck] = field(default_factory=list)


@dataclass(frozen=True)
class _Contexts:
    sentences: tuple[str, ...]
    folded: tuple[str, ...]
    whole: str


@lru_cache(maxsize=64)
def _contexts(contexts: tuple[str, ...]) -> _Contexts:
    sentences = tuple(s.text for c in contexts for s in split_sentences(c) if s.text.strip())
    folded = tuple(fold(s) for s in sentences)
    return _Contexts(sentences, folded, "\n".join(folded))


def claim_features(claims: Sequence[Claim], xe: Sequence[float], contexts: Sequence[str],
                   language: str) -> list[ClaimFeatures]:
    """Each claim's features, in FEATURES order of ``values``."""
    ctx = _contexts(tuple(contexts))
    last = max(1, len(claims) - 1)
    return [_one(c, float(p), i / last if len(claims) > 1 else 0.0, ctx, language)
            for i, (c, p) in enumerate(zip(claims, xe, strict=True))]


def _one(claim: Claim, xe: float, position: float, ctx: _Contexts, language: str) -> ClaimFeatures:
    stems = sorted({w.stem for w in anchors.content_words(claim.text, language)})
    held = [s for s in stems if s in ctx.whole]
    uncovered = 1.0 - len(held) / len(stems) if stems else 0.0
    best, best_share = -1, 0.0
    for i, sentence in enumerate(ctx.folded):
        share = sum(s in sentence for s in held) / len(stems) if stems else 0.0
        if share > best_share:
            best, best_share = i, share
    evidence = ctx.sentences if len(ctx.sentences) <= MAX_FACT_SENTENCES else _nearest(ctx, held)
    checks = check_claim(claim.text, evidence, language, rules=_RULES)
    conflicts = [c for c in checks if c.verdict != "supported" and c.rule in PRECISE]
    absent = [c for c in checks if c.verdict == "absent" and c.rule in _ABSENT_KIND]
    values = {name: 0.0 for name in FEATURES}
    values.update(xe=xe, conflict=float(bool(conflicts)), uncovered=uncovered, best_uncovered=1.0 - best_share,
                  length=math.log1p(len(stems)), position=position)
    for check in absent:
        key = _ABSENT_KIND[check.rule]
        values[key] = min(_MAX_ABSENT, values[key] + 1.0)
    values["absent_in_copy"] = min(_MAX_ABSENT, len(absent)) * best_share
    values["supported"] = float(min(_MAX_ABSENT, sum(c.verdict == "supported" for c in checks)))
    if best >= 0:
        sentence = ctx.sentences[best]
        # weighed by how much of the claim that sentence holds: a rewording seldom keeps the words and flips the sense
        dropped = conditions(sentence, language) > 0 and conditions(claim.text, language) == 0
        values["dropped_condition"] = float(dropped) * best_share
        values["negation"] = float((negations(sentence, language) > 0) != (negations(claim.text, language) > 0)) * best_share
    return ClaimFeatures(values, conflicts, absent)


def _nearest(ctx: _Contexts, held: list[str]) -> tuple[str, ...]:
    shared = [(sum(s in sentence for s in held), i) for i, sentence in enumerate(ctx.folded)]
    keep = sorted(i for _, i in sorted(shared, key=lambda t: (-t[0], t[1]))[:MAX_FACT_SENTENCES])
    return tuple(ctx.sentences[i] for i in keep)
