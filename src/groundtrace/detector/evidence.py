"""Evidence selection: before the encoder reads anything, each claim of the answer picks the context
sentences that could support it, so the encoder reads the answer against those few sentences
instead of every retrieved window, and the cost follows the answer, not the retrieved pile.

    sentences   = every context's sentences (text.sentences), in order, with their offsets
    score(c, s) = BM25 of claim c's content terms in sentence s (the project's tokens: jieba for
                  Chinese, stopwords out, Russian words cut to a 5-letter stem), IDF over the
                  record's sentences; or the cosine of their sentence embeddings ("embedding"),
                  or the sum of both ranks' reciprocals ("hybrid")
    picked(c)   = the top ``k`` sentences of claim c with a score above 0; then (``cover``) while
                  some content term of c that the contexts hold is in no pick, the sentence that
                  adds the most IDF of such terms, up to ``max_picks`` (a claim that lists ten
                  foods needs the sentences that name them)
    read(c)     = picked(c) and, for each pick, its ``neighbours`` sentences before and after in
                  the same context (coreference: "It opens at 9" needs the sentence that names "it"),
                  and (``titles``) the first sentence of each context it picked from (a passage's
                  title or topic: "Washing Your Dog with Apple Cider Vinegar" makes "Spray your
                  dog's coat" about vinegar)
    passages    = sentences as the encoder reads them, in context order: adjacent sentences of
                  one context as one passage (their original text), others as separate passages

Each answer chunk is read against the passages of the claims in it (detector/packing.py). Training
code builds its inputs from ``select_evidence`` / ``evidence_for_record`` and ``packing``, so a model
learns the format it is run on.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np

from groundtrace.detector.claims import Claim, split_claims
from groundtrace.text.lang import guess_language
from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import terms

Selector = Literal["lexical", "embedding", "hybrid"]
SELECTORS = ("lexical", "embedding", "hybrid")
DEFAULT_K = 2
DEFAULT_NEIGHBOURS = 1
DEFAULT_MAX_PICKS = 8
_BM25_K1, _BM25_B = 1.2, 0.75
_RRF = 10  # reciprocal-rank fusion constant: the top ranks of both selectors dominate
_CYRILLIC = re.compile(r"[а-яё]")


class SentenceEmbedder(Protocol):
    """What the "embedding" selector needs: L2-normalised rows (groundtrace.backends' embedders)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Sentence:
    context: int  # index into the contexts
    index: int  # position among that context's sentences
    start: int  # character offsets into that context
    end: int
    text: str


@dataclass(frozen=True)
class Evidence:
    contexts: Sequence[str]
    sentences: list[Sentence]  # every context sentence, in order
    claims: list[Claim]
    picked: list[list[int]]  # per claim: indices into ``sentences``, best first (without neighbours)
    reads: list[list[int]]  # per claim: its picks and their neighbours, in context order
    kept: list[int]  # the union of ``reads``, in context order
    neighbours: int = DEFAULT_NEIGHBOURS
    titles: bool = True

    def around(self, claims: Sequence[int], radius: int) -> list[int]:
        """What ``claims`` read with ``radius`` neighbours on each side of every pick (and titles)."""
        return sorted({j for c in claims for i in self.picked[c] for j in _within(self.sentences, i, radius, self.titles)})

    def evidence_of(self, claim: int) -> list[Sentence]:
        """The sentences claim ``claim`` picked, best first."""
        return [self.sentences[i] for i in self.picked[claim]]

    def passages_of(self, indices: Sequence[int]) -> list[str]:
        """Sentences as the encoder reads them: each run of adjacent sentences of one context as
        one passage (its original text), in context order."""
        return _passages(self.contexts, self.sentences, sorted(set(indices)))

    @property
    def passages(self) -> list[str]:
        """Everything any claim reads, as passages."""
        return self.passages_of(self.kept)


def context_sentences(contexts: Sequence[str]) -> list[Sentence]:
    return [Sentence(c, i, s.start, s.end, s.text)
            for c, context in enumerate(contexts) for i, s in enumerate(split_sentences(context))]


def content_terms(text: str, language: str) -> list[str]:
    """Terms that carry content: folded, numbers in one form, no stopwords, Russian words stemmed."""
    stop = stopwords(language) | stopwords("en")
    out = []
    for token in terms(text, language):
        word = token.text
        if word in stop or not any(ch.isalnum() for ch in word):
            continue
        if _CYRILLIC.search(word) and len(word) > 5:
            word = word[:5]  # Russian inflects the ending: "жителей" and "жители" share "жител"
        out.append(word)
    return out


@lru_cache(maxsize=4096)
def _sentence_terms(text: str, language: str) -> tuple[str, ...]:
    return tuple(content_terms(text, language))


def clear_caches() -> None:
    """Forget the tokenized context sentences (benchmarks measure cold reads with it)."""
    _sentence_terms.cache_clear()


class BM25:
    """Okapi BM25 over one record's context sentences."""

    def __init__(self, documents: list[tuple[str, ...]]) -> None:
        self.documents = [Counter(d) for d in documents]
        self.lengths = np.array([len(d) for d in documents], dtype=np.float64)
        self.mean_length = float(self.lengths.mean()) if len(documents) and self.lengths.sum() else 1.0
        frequency: Counter[str] = Counter(t for d in self.documents for t in d)
        n = len(documents)
        self.idf = {t: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for t, df in frequency.items()}

    def scores(self, query: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(self.documents))
        norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * self.lengths / self.mean_length)
        for term in set(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.documents], dtype=np.float64)
            out += idf * tf * (_BM25_K1 + 1) / (tf + norm)
        return out


def select_evidence(question: str | None, contexts: Sequence[str], answer: str, language: str, *,
                    k: int = DEFAULT_K, neighbours: int = DEFAULT_NEIGHBOURS, selector: Selector = "lexical",
                    embedder: SentenceEmbedder | None = None, claims: list[Claim] | None = None,
                    cover: bool = True, max_picks: int = DEFAULT_MAX_PICKS, titles: bool = True) -> Evidence:
    """The evidence each claim of ``answer`` picks from ``contexts`` (see the module's docstring)."""
    if selector not in SELECTORS:
        raise ValueError(f"evidence selector must be one of {SELECTORS}, got {selector!r}")
    if selector != "lexical" and embedder is None:
        raise ValueError(f"the {selector!r} evidence selector needs a sentence embedder")
    claims = split_claims(answer, language) if claims is None else claims
    sentences = context_sentences(contexts)
    if not sentences or not claims:
        return Evidence(contexts, sentences, claims, [[] for _ in claims], [[] for _ in claims], [])
    sentence_terms = [_sentence_terms(s.text, language) for s in sentences]
    claim_terms = [content_terms(c.text, language) for c in claims]
    bm25 = BM25(sentence_terms)
    scores = _scores(claims, sentences, claim_terms, bm25, selector, embedder)
    picked = [_top(row, k) for row in scores]
    if cover:
        covering = [set(t) for t in sentence_terms]
        picked = [_cover(row, set(terms), covering, bm25.idf, max_picks) for row, terms in zip(picked, claim_terms, strict=True)]
    reads = [sorted({j for i in row for j in _within(sentences, i, neighbours, titles)}) for row in picked]
    return Evidence(contexts, sentences, claims, picked, reads, sorted({i for row in reads for i in row}),
                    neighbours, titles)


def evidence_for_record(record: dict, *, k: int = DEFAULT_K, neighbours: int = DEFAULT_NEIGHBOURS,
                        selector: Selector = "lexical", embedder: SentenceEmbedder | None = None) -> list[dict]:
    """Per claim of a record (a dict shaped like ../shared/data: question, contexts, answer, language?),
    what the encoder reads under evidence selection, for training code:

        {"claim": text, "start": int, "end": int,      # the claim, offsets into the answer
         "picked": [sentence, ...],                     # its top-k sentences, best first
         "passages": [text, ...]}                       # picks + neighbours as read, in context order
    """
    answer = record["answer"]
    language = record.get("language") or guess_language(answer)
    contexts = [c for c in record.get("contexts") or [] if c.strip()]
    found = select_evidence(record.get("question"), contexts, answer, language, k=k, neighbours=neighbours,
                            selector=selector, embedder=embedder)
    return [{"claim": claim.text, "start": claim.start, "end": claim.end,
             "picked": [s.text for s in found.evidence_of(c)], "passages": found.passages_of(found.reads[c])}
            for c, claim in enumerate(found.claims)]


def _cover(picked: list[int], wanted: set[str], covering: list[set[str]], idf: dict[str, float],
           max_picks: int) -> list[int]:
    """``picked`` and then, greedily, the sentence that adds the most IDF of the claim's terms no
    pick holds yet, until every term the contexts hold is covered or ``max_picks`` are picked:
    a claim that lists ten things needs the sentences that name them."""
    picked = list(picked)
    missing = {t for t in wanted if t in idf} - set().union(*(covering[i] for i in picked))
    while missing and len(picked) < max_picks:
        gains = [sum(idf[t] for t in missing & terms) for terms in covering]
        best = int(np.argmax(gains))
        if gains[best] <= 0:
            break
        picked.append(best)
        missing -= covering[best]
    return picked


def _scores(claims: list[Claim], sentences: list[Sentence], claim_terms: list[list[str]], bm25: BM25,
            selector: Selector, embedder: SentenceEmbedder | None) -> np.ndarray:
    """[claims, sentences]: higher = more likely to support; <= 0 = no reason to pick it."""
    lexical = embedding = None
    if selector in ("lexical", "hybrid"):
        lexical = np.stack([bm25.scores(terms) for terms in claim_terms])
    if selector in ("embedding", "hybrid"):
        assert embedder is not None
        vectors = embedder.embed([c.text for c in claims] + [s.text for s in sentences])
        embedding = vectors[:len(claims)] @ vectors[len(claims):].T
    if lexical is None:
        assert embedding is not None
        return embedding
    if embedding is None:
        return lexical
    return _reciprocal_ranks(lexical, positive_only=True) + _reciprocal_ranks(embedding, positive_only=False)


def _reciprocal_ranks(scores: np.ndarray, positive_only: bool) -> np.ndarray:
    ranks = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1)
    fused = 1.0 / (_RRF + ranks + 1)
    return np.where(scores > 0, fused, 0.0) if positive_only else fused


def _top(row: np.ndarray, k: int) -> list[int]:
    order = np.argsort(-row, kind="stable")[:k]
    return [int(i) for i in order if row[i] > 0]


def _within(sentences: list[Sentence], i: int, neighbours: int, title: bool) -> list[int]:
    """Sentence i, its neighbours in its context, and (``title``) that context's first sentence."""
    s = sentences[i]
    near = [j for j in range(i - neighbours, i + neighbours + 1)
            if 0 <= j < len(sentences) and sentences[j].context == s.context]
    return near + [i - s.index] if title else near


def _passages(contexts: Sequence[str], sentences: list[Sentence], kept: list[int]) -> list[str]:
    """Runs of adjacent kept sentences of one context, each as its original text."""
    passages: list[str] = []
    run: list[Sentence] = []
    for i in kept:
        s = sentences[i]
        if run and (s.context != run[-1].context or s.index != run[-1].index + 1):
            passages.append(contexts[run[0].context][run[0].start:run[-1].end])
            run = []
        run.append(s)
    if run:
        passages.append(contexts[run[0].context][run[0].start:run[-1].end])
    return passages
