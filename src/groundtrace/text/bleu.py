"""Sentence BLEU with NLTK's semantics (no smoothing), fast for one reference reused many times.

NLTK's ``sentence_bleu`` with its default smoothing returns 0 when no unigram matches, and a
vanishing number (~1e-90) when an order with non-zero weight has no match; we return exactly 0
there. Tests check agreement with NLTK on real text.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    if n == 1:
        return Counter(tokens)
    return Counter(zip(*(tokens[i:] for i in range(n)), strict=False))


def orders(weights: Sequence[float]) -> int:
    """How many n-gram orders matter: up to the last one with a non-zero weight."""
    return max((n for n, w in enumerate(weights, start=1) if w), default=1)


class NgramCounts:
    """The n-gram counts of one token sequence, computed once and reused against many others."""

    def __init__(self, tokens: Sequence[str], max_n: int) -> None:
        self.length = len(tokens)
        self.counts = [ngrams(tokens, n) for n in range(1, max_n + 1)]


def bleu(reference: NgramCounts, hypothesis: NgramCounts, weights: Sequence[float]) -> float:
    """BLEU of ``hypothesis`` against ``reference``; 0.0 where it is undefined or an order has no match."""
    if hypothesis.length == 0 or reference.length == 0:
        return 0.0
    needed = orders(weights)
    if needed > min(len(reference.counts), len(hypothesis.counts)):
        raise ValueError(f"weights need {needed}-grams, the counts stop earlier")
    log_sum = 0.0
    for n in range(1, needed + 1):
        weight = weights[n - 1]
        hyp, ref = hypothesis.counts[n - 1], reference.counts[n - 1]
        matched = sum(min(count, ref[gram]) for gram, count in hyp.items() if gram in ref)
        if matched == 0:
            if n == 1 or weight:
                return 0.0  # NLTK: no unigram match -> 0; weight * log(tiny) -> indistinguishable from 0
            continue
        if weight:
            log_sum += weight * math.log(matched / sum(hyp.values()))
    c, r = hypothesis.length, reference.length
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * math.exp(log_sum)


def sentence_bleu(reference: Sequence[str], hypothesis: Sequence[str], weights: Sequence[float] = (0.25,) * 4) -> float:
    n = orders(weights)
    return bleu(NgramCounts(reference, n), NgramCounts(hypothesis, n), weights)
