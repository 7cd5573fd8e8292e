"""Claims of an answer: its sentences, long ones cut at clause joints, minus talk about the sources.

What an answer says about its sources or itself is not a claim about the world: "Based on the
passages, ..." lead-ins and "(Passage 2)" citations are cut off a claim; refusals ("the passages
do not say"), offers and courtesies are no claim at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import Token, terms

# Joints where one sentence often carries two claims ("X, and Y"; "X; moreover Y"; "X，同时Y").
_CLAUSE_JOINT = re.compile(
    r"(?:;\s+|,\s+(?:and|but|while|whereas|which|although)\s+|;\s*(?:кроме того|также),?\s+"
    r"|,\s+(?:а также|а|но|однако|причём|при этом)\s+|[；]|，(?:同时|而且|并且|此外|但是?|另外))",
    re.IGNORECASE,
)
_MIN_CLAUSE_TERMS = 4
_MIN_KEYWORD_CHARS = {"zh": 2}

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


_LIST_NUMBER = re.compile(r"\s*(?:\d{1,2}[.)]|[-*•])\s*")


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
    if not re.search(r"[^\W\d_]", text) and (not re.search(r"\d", text) or _LIST_NUMBER.fullmatch(text)):
        return None  # a bare list number "1." is no claim; a lone fact ("45", "€45", "7:00", "1879") is one
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

