"""Per-claim features of the grounding detector, shared by training and inference.

An answer is cut into claims (sentences, and long sentences at clause joints). Each claim is
compared with every sentence of the contexts: multilingual USE similarity (is it said there, in any
wording?), content-word and bigram coverage (are its words there?), and checkable facts (are its
numbers, dates and names there?). A small network turns the features into the probability that the
claim is unsupported; the answer's probability is that of its worst claim.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import numpy as np

from groundtrace.backends.embedders import Embedder
from groundtrace.text.facts import FactIndex, extract_facts
from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import Token, terms

FEATURE_NAMES = (
    "sim_top1",
    "sim_top2",
    "sim_top3_mean",
    "sim_pair",
    "sim_question",
    "term_coverage",
    "term_coverage_best",
    "unexpected_terms_log",
    "unexpected_share_with_question",
    "bigram_coverage",
    "facts_log",
    "unsupported_numbers",
    "unsupported_names",
    "negation_mismatch",
    "claim_terms_log",
)

# Joints where one sentence often carries two claims ("X, and Y"; "X; moreover Y"; "X，同时Y").
_CLAUSE_JOINT = re.compile(
    r"(?:;\s+|,\s+(?:and|but|while|whereas|which|although)\s+|;\s*(?:кроме того|также),?\s+"
    r"|,\s+(?:а также|а|но|однако|причём|при этом)\s+|[；]|，(?:同时|而且|并且|此外|但是?|另外))",
    re.IGNORECASE,
)
_MIN_CLAUSE_TERMS = 4
_NEGATION = re.compile(
    r"\b(?:not|no|never|cannot|can't|won't|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|without|none)\b"
    r"|\b(?:не|нет|нельзя|ни|без|никогда)\b|[不没未无非别]",
    re.IGNORECASE,
)
_MIN_KEYWORD_CHARS = {"zh": 2}

# What an answer says about its sources or itself is not a claim about the world: "Based on the
# passages, ..." lead-ins and "(Passage 2)" citations are cut off a claim; refusals ("the passages
# do not say"), offers and courtesies are no claim at all. A claim that only cites is dropped too.
_SOURCE = (
    r"(?:the\s+)?(?:given\s+|provided\s+|above\s+|these\s+|retrieved\s+)?(?:passages?|context|documents?|sources?|texts?|information)"
    r"(?:\s+\d+(?:\s*(?:,|and)\s*\d+)*)?(?:\s+(?:provided|given|above))?"
)
_LEAD_IN = re.compile(
    r"^(?:answer:\s*|sure[!,.]\s*|(?:based|relying)\s+(?:solely\s+|only\s+)?on\s+" + _SOURCE + r"(?:\s+provided)?,?\s*"
    r"|according\s+to\s+" + _SOURCE + r",?\s*|as\s+(?:stated|mentioned)\s+in\s+" + _SOURCE + r",?\s*"
    r"|(?:therefore|so|thus|in\s+summary|overall),\s*(?:based\s+on\s+" + _SOURCE + r",\s*)?"
    r"|(?:согласно|по\s+данным|исходя\s+из|на\s+основании)\s+(?:\w+\s+)?(?:текст|фрагмент|контекст|источник|документ|материал|отрывк)\w*,?\s*"
    r"|(?:根据|依据|基于)(?:所给|提供的|以上|上述|给定的)?(?:的)?(?:材料|资料|段落|文章|上下文|信息|文本|内容)[，,：:]?)",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\s*[(\[](?:(?:based\s+on|see|from|cf\.?)\s+)?(?:passages?|source|doc(?:ument)?|context|пассаж|фрагмент|источник|段落|文档)\s*\d+(?:\s*(?:,|and|и|和)\s*\d+)*[)\]]", re.IGNORECASE)
_META = re.compile(
    r"unable\s+to\s+answer|(?:do(?:es)?|did)\s+not\s+(?:provide|mention|specify|say|contain|include|state|give)"
    r"|not\s+(?:possible|able)\s+to\s+(?:provide|answer|determine|say)|(?:can ?not|can't|am\s+unable\s+to)\s+(?:provide|answer|determine|confirm)"
    r"|no\s+(?:specific\s+)?(?:information|mention)\b|not\s+(?:explicitly\s+)?(?:mentioned|stated|specified)\b"
    r"|\bi\s+hope\s+(?:this|that)\s+helps|let\s+me\s+know|feel\s+free\s+to|\bhere\s+(?:is|are)\s+(?:a|the|some)\b.{0,40}:$"
    r"|\b(?:passages?|context)\s+\d*\s*(?:provides?|mentions?|states?|says?|explains?|describes?)\b"
    r"|не\s+(?:указан|упомина|сказано|содерж|приводит)|нет\s+(?:информации|сведений|данных)|невозможно\s+(?:ответить|определить)|не\s+могу\s+(?:ответить|сказать)"
    r"|未(?:提及|提到|说明|给出)|没有(?:提及|提到|相关信息|说明)|无法(?:回答|确定|判断)|不能(?:回答|确定)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Claim:
    text: str
    start: int
    end: int


def split_claims(answer: str, language: str) -> list[Claim]:
    """Claims about the world in the answer: sentences, long ones cut at clause joints, without
    lead-ins, citations and statements about the sources; offsets index the answer."""
    claims: list[Claim] = []
    for sentence in split_sentences(answer):
        if _META.search(sentence.text):
            continue
        for s, e in _clauses(sentence, language):
            claim = _strip_source_talk(answer, s, e)
            if claim is not None:
                claims.append(claim)
    return claims


def _strip_source_talk(answer: str, start: int, end: int) -> Claim | None:
    lead = _LEAD_IN.match(answer, start, end)
    if lead:
        start = lead.end()
    text = answer[start:end]
    cited = _CITATION.search(text)
    if cited and not text[cited.end():].strip(" .;,。"):
        end = start + cited.start()
        text = answer[start:end]
    if not re.search(r"[^\W\d_]", text):  # a bare list number "1." is no claim
        return None
    return Claim(text, start, end)


def _clauses(sentence: Token, language: str) -> list[tuple[int, int]]:
    # (end of the left side, start of the right side) for every joint, in sentence offsets
    joints = [(m.start(), m.end()) for m in _CLAUSE_JOINT.finditer(sentence.text)]
    pieces, start = [], 0
    for left_end, right_start in joints:
        left, right = sentence.text[start:left_end], sentence.text[right_start:]
        # cut only when both sides carry a claim of their own
        if len(_content(left, language)) >= _MIN_CLAUSE_TERMS and len(_content(right, language)) >= _MIN_CLAUSE_TERMS:
            pieces.append((start, left_end))
            start = right_start
    pieces.append((start, len(sentence.text)))
    return [(sentence.start + s, sentence.start + e) for s, e in pieces if e > s]


def _content(text: str, language: str) -> list[str]:
    stop = stopwords(language)
    floor = _MIN_KEYWORD_CHARS.get(language, 2)
    return [t.text for t in terms(text, language) if t.text not in stop and (len(t.text) >= floor or t.text[0].isdigit())]


def _stem(word: str) -> str:
    # crude but language-neutral: Russian and English inflections live in the last few letters
    return word[:5] if len(word) > 5 and not word[0].isdigit() else word


@dataclass
class ContextView:
    """Everything about the contexts that does not depend on the answer (computed once)."""

    sentences: list[str]
    vectors: np.ndarray
    pair_vectors: np.ndarray
    stems: set[str]
    bigrams: set[tuple[str, str]]
    sentence_stems: list[set[str]]
    facts: FactIndex
    negations: list[int]


@lru_cache(maxsize=256)
def _context_sentences(contexts: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    sentences, owners = [], []
    for index, context in enumerate(contexts):
        for sentence in split_sentences(context):
            sentences.append(sentence.text)
            owners.append(index)
    return tuple(sentences), tuple(owners)


_VIEWS: OrderedDict[tuple, ContextView] = OrderedDict()
_VIEWS_LOCK = threading.Lock()
_VIEWS_SIZE = 64


def context_view(contexts: list[str], language: str, embedder: Embedder) -> ContextView:
    """The contexts' view, cached: one retrieval result is often scored for several answers."""
    key = (tuple(contexts), language, id(embedder))
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is not None:
            _VIEWS.move_to_end(key)
            return view
    view = _build_context_view(contexts, language, embedder)
    with _VIEWS_LOCK:
        _VIEWS[key] = view
        while len(_VIEWS) > _VIEWS_SIZE:
            _VIEWS.popitem(last=False)
    return view


def clear_context_views() -> None:
    with _VIEWS_LOCK:
        _VIEWS.clear()


def _build_context_view(contexts: list[str], language: str, embedder: Embedder) -> ContextView:
    sentences, owners = _context_sentences(tuple(contexts))
    sentences = list(sentences) or [""]
    vectors = embedder.embed(sentences)
    pairs = vectors.copy()
    for i in range(len(sentences) - 1):
        if owners and owners[i] == owners[i + 1]:
            joined = vectors[i] + vectors[i + 1]
            pairs[i] = joined / (np.linalg.norm(joined) or 1.0)
    sentence_terms = [_content(s, language) for s in sentences]
    all_text = "\n".join(contexts)
    words = [t.text for t in terms(all_text, language)]
    return ContextView(
        sentences=sentences,
        vectors=vectors,
        pair_vectors=pairs,
        stems={_stem(w) for ws in sentence_terms for w in ws},
        bigrams=set(pairwise(map(_stem, words))),
        sentence_stems=[{_stem(w) for w in ws} for ws in sentence_terms],
        facts=FactIndex.build(all_text, language),
        negations=[len(_NEGATION.findall(s)) for s in sentences],
    )


def claim_features(
    claims: list[Claim],
    question: str,
    context: ContextView,
    language: str,
    embedder: Embedder,
) -> np.ndarray:
    """One row of FEATURE_NAMES per claim (float32)."""
    if not claims:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32)
    texts = [c.text for c in claims]
    vectors = embedder.embed(texts + ([question] if question else []))
    claim_vectors = vectors[: len(claims)]
    question_vector = vectors[len(claims)] if question else None
    sims = claim_vectors @ context.vectors.T  # claims x context sentences
    pair_sims = (claim_vectors @ context.pair_vectors.T).max(axis=1)
    ordered = -np.sort(-sims, axis=1)
    top1 = ordered[:, 0]
    top2 = ordered[:, 1] if ordered.shape[1] > 1 else ordered[:, 0]
    top3 = ordered[:, :3].mean(axis=1)
    best = sims.argmax(axis=1)
    question_stems = {_stem(w) for w in _content(question, language)} if question else set()
    rows = []
    for i, claim in enumerate(claims):
        content = _content(claim.text, language)
        stems = [_stem(w) for w in content]
        n = len(stems)
        covered = sum(s in context.stems for s in stems)
        covered_best = sum(s in context.sentence_stems[best[i]] for s in stems)
        unexpected = [s for s in stems if s not in context.stems]
        unexpected_q = [s for s in unexpected if s not in question_stems]
        words = [_stem(t.text) for t in terms(claim.text, language)]
        bigrams = list(pairwise(words))
        facts = extract_facts(claim.text, language)
        bad = [f for f in facts if not context.facts.supports(f)]
        negation = len(_NEGATION.findall(claim.text))
        rows.append(
            [
                top1[i],
                top2[i],
                top3[i],
                pair_sims[i],
                float(claim_vectors[i] @ question_vector) if question_vector is not None else 0.0,
                covered / n if n else 1.0,
                covered_best / n if n else 1.0,
                math.log1p(len(unexpected)),
                len(unexpected_q) / n if n else 0.0,
                sum(b in context.bigrams for b in bigrams) / len(bigrams) if bigrams else 1.0,
                math.log1p(len(facts)),
                min(sum(f.kind != "name" for f in bad), 3),
                min(sum(f.kind == "name" for f in bad), 3),
                float((negation % 2) != (context.negations[best[i]] % 2)),
                math.log1p(n),
            ]
        )
    return np.asarray(rows, dtype=np.float32)


def answer_features(
    question: str | None,
    contexts: list[str],
    answer: str,
    language: str,
    embedder: Embedder,
) -> tuple[list[Claim], np.ndarray]:
    """The claims of ``answer`` and their feature rows."""
    claims = split_claims(answer, language)
    view = context_view([c for c in contexts if c.strip()], language, embedder)
    return claims, claim_features(claims, question or "", view, language, embedder)
