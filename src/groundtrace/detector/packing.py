"""How the cross-encoder reads selected evidence: ``<s> question </s> evidence </s></s> answer chunk </s>``,
in as few 512-token windows as the evidence needs (usually one).

The answer is cut into the chunks of the full reading (ANSWER_CHUNK tokens: the format the model was
trained on); each chunk is read against the sentences that the claims overlapping it picked, with
their neighbours (``Evidence.passages_of``: adjacent sentences of one context keep their original
text; passages joined by CONTEXT_SEPARATOR, as contexts are), in overlapping windows only when that
evidence is longer than one window's room, and then in windows of equal length, no longer than needed. A chunk with no claim (a refusal, a courtesy) is read
without evidence. A token's P(unsupported) is the minimum over the windows that read it, as in the
full reading. Training builds its inputs with ``evidence_windows`` too.
"""

from __future__ import annotations

import numpy as np

from groundtrace.detector.evidence import Evidence
from groundtrace.detector.tokenizer import Encoding, XETokenizer
from groundtrace.detector.windows import ANSWER_CHUNK, CONTEXT_SEPARATOR, MAX_TOKENS, Window, question_head, read_windows

_MAX_RADIUS = 8  # widening stops here: a window's room is rarely worth more sentences than that


def evidence_windows(tokenizer: XETokenizer, question: str | None, evidence: Evidence, answer: Encoding,
                     max_tokens: int = MAX_TOKENS, fill: bool = False) -> list[Window]:
    head = question_head(tokenizer, question)
    n = len(answer)
    everything: np.ndarray | None = None
    windows: list[Window] = []
    for start in range(0, max(n, 1), ANSWER_CHUNK):
        chunk = np.arange(start, min(start + ANSWER_CHUNK, n))
        first, last = (int(answer.starts[chunk[0]]), int(answer.ends[chunk[-1]])) if len(chunk) else (0, 0)
        claims = [c for c, claim in enumerate(evidence.claims) if claim.start < last and claim.end > first]
        ids = _ids(tokenizer, evidence, evidence.around(claims, evidence.neighbours))
        room = max_tokens - len(head) - len(chunk) - 3
        if fill and len(ids) < room:
            if everything is None:
                everything = tokenizer.encode(CONTEXT_SEPARATOR.join(evidence.contexts)).ids
            ids = everything if len(everything) <= room else _grown(tokenizer, evidence, claims, ids, room)
        windows += read_windows(tokenizer, head, ids, answer, chunk, max_tokens, balanced=True)
    return windows


def _grown(tokenizer: XETokenizer, evidence: Evidence, claims: list[int], ids: np.ndarray, room: int) -> np.ndarray:
    """The claims' evidence widened, one sentence on each side of every pick at a time, while it fits."""
    radius, before = evidence.neighbours, evidence.around(claims, evidence.neighbours)
    while radius < _MAX_RADIUS:
        radius += 1
        wider = evidence.around(claims, radius)
        if wider == before:
            break
        wider_ids = _ids(tokenizer, evidence, wider)
        if len(wider_ids) > room:
            break
        before, ids = wider, wider_ids
    return ids


def _ids(tokenizer: XETokenizer, evidence: Evidence, indices) -> np.ndarray:
    passages = evidence.passages_of(list(indices))
    if not passages:
        return np.zeros(0, dtype=np.int64)
    return tokenizer.encode(CONTEXT_SEPARATOR.join(passages)).ids
