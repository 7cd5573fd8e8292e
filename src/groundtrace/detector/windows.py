"""How the cross-encoder reads a record: ``<s> question </s> context window </s></s> answer chunk </s>``.

Nothing is truncated. An answer longer than ``ANSWER_CHUNK`` tokens is read in consecutive chunks;
the contexts (all of them, in order) are read in overlapping windows that fill the rest of the
``MAX_TOKENS`` budget. Every answer token is scored against every context window, and its
P(unsupported) is the minimum over the windows: a token is supported if any part of the contexts
supports it. Training (training/xe) builds its inputs with these same functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from groundtrace.detector.tokenizer import Encoding, XETokenizer

MAX_TOKENS = 512  # the encoder's positions
ANSWER_CHUNK = 224
QUESTION_TOKENS = 48
MIN_CONTEXT_WINDOW = 96
CONTEXT_OVERLAP = 64
CONTEXT_SEPARATOR = "\n"


@dataclass(frozen=True)
class Window:
    ids: np.ndarray  # token ids of the whole input, specials included
    answer_offset: int  # position of the chunk's first answer token in ``ids``
    answer_tokens: np.ndarray  # indices into the answer's Encoding, one per answer position


def context_windows(context_ids: np.ndarray, size: int, balanced: bool = False) -> list[np.ndarray]:
    """Overlapping windows of at most ``size`` tokens over the context; ``balanced``: as many as
    needed, each only as long as needed (the evidence reading: shorter windows cost less)."""
    if len(context_ids) <= size:
        return [context_ids]
    if balanced:
        step = max(size - CONTEXT_OVERLAP, size // 2)
        count = -(-(len(context_ids) - size) // step) + 1
        size = -(-(len(context_ids) + (count - 1) * CONTEXT_OVERLAP) // count)
    step = max(size - CONTEXT_OVERLAP, size // 2)
    starts = list(range(0, len(context_ids) - size, step)) + [len(context_ids) - size]
    return [context_ids[s:s + size] for s in starts]


def question_head(tokenizer: XETokenizer, question: str | None) -> np.ndarray:
    """``<s> question </s>`` (the question cut to QUESTION_TOKENS), or ``<s>`` without a question."""
    q_ids = tokenizer.encode(question).ids[:QUESTION_TOKENS] if question else np.zeros(0, dtype=np.int64)
    if not len(q_ids):
        return np.asarray([tokenizer.bos_id], dtype=np.int64)
    return np.concatenate([[tokenizer.bos_id], q_ids, [tokenizer.eos_id]]).astype(np.int64)


def read_windows(tokenizer: XETokenizer, head: np.ndarray, context_ids: np.ndarray, answer: Encoding,
                 answer_idx: np.ndarray, max_tokens: int = MAX_TOKENS, balanced: bool = False) -> list[Window]:
    """The answer tokens ``answer_idx`` read against ``context_ids`` in as few windows as fit."""
    eos = tokenizer.eos_id
    budget = max_tokens - len(head) - len(answer_idx) - 3  # </s></s> between, </s> at the end
    if budget < MIN_CONTEXT_WINDOW and len(head) > 1:  # a long chunk leaves the question out first
        head = np.asarray([tokenizer.bos_id], dtype=np.int64)
        budget = max_tokens - 1 - len(answer_idx) - 3
    return [Window(np.concatenate([head, c_win, [eos, eos], answer.ids[answer_idx], [eos]]).astype(np.int64),
                   len(head) + len(c_win) + 2, answer_idx)
            for c_win in context_windows(context_ids, budget, balanced)]


def build_windows(tokenizer: XETokenizer, question: str | None, contexts: list[str], answer: Encoding,
                  max_tokens: int = MAX_TOKENS) -> list[Window]:
    head = question_head(tokenizer, question)
    c_ids = tokenizer.encode(CONTEXT_SEPARATOR.join(contexts)).ids if contexts else np.zeros(0, dtype=np.int64)
    windows: list[Window] = []
    n = len(answer)
    for a_start in range(0, max(n, 1), ANSWER_CHUNK):
        a_idx = np.arange(a_start, min(a_start + ANSWER_CHUNK, n))
        windows += read_windows(tokenizer, head, c_ids, answer, a_idx, max_tokens)
    return windows


def pad_batch(windows: list[Window], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """ids [batch, longest] padded with ``pad_id``, and the attention mask (1 = real token)."""
    longest = max(len(w.ids) for w in windows)
    ids = np.full((len(windows), longest), pad_id, dtype=np.int64)
    mask = np.zeros((len(windows), longest), dtype=np.int64)
    for row, w in enumerate(windows):
        ids[row, :len(w.ids)] = w.ids
        mask[row, :len(w.ids)] = 1
    return ids, mask


def answer_minimum(windows: list[Window], window_values: list[np.ndarray], n_answer: int) -> np.ndarray:
    """Per answer token, the minimum over the windows that read it (logits or probabilities)."""
    out = np.full(n_answer, np.inf)
    for w, values in zip(windows, window_values, strict=True):
        np.minimum.at(out, w.answer_tokens, values[w.answer_offset:w.answer_offset + len(w.answer_tokens)])
    return out
