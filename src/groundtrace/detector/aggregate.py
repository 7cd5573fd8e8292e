"""From token probabilities to a claim's and an answer's probability of being unsupported.

    p_claim  = mean of the claim's TOP_TOKENS highest P(unsupported) (over its word tokens)
    p_answer = 1 - prod(1 - p_claim): the probability that at least one claim is unsupported

A single token is a noisy witness (a reworded word of a faithful claim can reach 0.9); the mean of a
claim's three strongest tokens keeps a one-word contradiction visible without letting one stray
token decide. The noisy-OR reads every claim, so a second unsupported claim raises the answer's
value where the maximum would not move; it also grows with the number of doubtful claims, which is
what the value means: more claims that may be unsupported, more chance that one is.
Training (training/xe) scores its measurement sets with these same functions.
"""

from __future__ import annotations

import numpy as np

TOP_TOKENS = 3
_CEILING = 0.999  # no claim is certain: keeps the noisy-OR below 1 and its logit finite


def claim_probability(token_p: np.ndarray) -> float:
    if len(token_p) == 0:
        return 0.0
    return float(np.sort(token_p)[-TOP_TOKENS:].mean())


def answer_probability(claim_p: list[float] | np.ndarray) -> float:
    p = np.clip(np.asarray(claim_p, dtype=np.float64), 0.0, _CEILING)
    return float(1.0 - np.prod(1.0 - p)) if len(p) else 0.0


def claim_probabilities(token_p: np.ndarray, claim_of: np.ndarray, claims: int) -> list[float]:
    """Each claim's probability from the tokens labelled with its index in ``claim_of`` (-1: none)."""
    return [claim_probability(token_p[claim_of == c]) for c in range(claims)]
