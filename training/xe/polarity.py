"""Contradiction and dropped-condition twins of faithful answers: the same words, another meaning.

A 6-layer encoder reads wording better than logic: on the paraphrase dev set it caught changed numbers
and baseless sentences but passed "allowed" for "not allowed" and an answer that dropped a
condition. These twins teach polarity and scope with everything else held fixed. For a faithful
answer sentence and the context sentence that supports it (most of its content words), when both
contain the same flippable word (open/closed, можно/нельзя, 可以/不可以, is/is not, ...):

    answer flipped      -> contradicted (label 1), span: the flipped word in the answer
    context flipped     -> contradicted (label 1), span: the unchanged word in the answer
    both flipped        -> faithful (label 0): a negation or antonym is not itself a sign of error

and with a restriction added to the supporting context sentence ("but only for ..."):

    context restricted  -> the answer sentence over-claims (label 1), span: that sentence
    both restricted     -> faithful (label 0)

Every twin keeps the answer's length and wording within a word or a clause of its source.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import jieba_module, terms

_PAIRS = {
    "en": [("open", "closed"), ("opens", "closes"), ("allowed", "prohibited"), ("permitted", "forbidden"),
           ("free", "paid"), ("before", "after"), ("more", "less"), ("increase", "decrease"),
           ("increased", "decreased"), ("higher", "lower"), ("earlier", "later"), ("minimum", "maximum"),
           ("always", "never"), ("included", "excluded"), ("available", "unavailable"), ("accepted", "rejected"),
           ("possible", "impossible"), ("required", "optional"), ("with", "without"), ("can", "cannot"),
           ("must", "need not"), ("first", "last"), ("inside", "outside"), ("above", "below"), ("all", "none of the"),
           ("is", "is not"), ("are", "are not"), ("was", "was not"), ("were", "were not"), ("will", "will not"),
           ("has", "does not have"), ("have", "do not have"), ("refundable", "non-refundable"), ("win", "lose"),
           ("won", "lost"), ("rise", "fall"), ("rose", "fell"), ("success", "failure"), ("true", "false")],
    "ru": [("можно", "нельзя"), ("разрешено", "запрещено"), ("разрешается", "запрещается"), ("бесплатно", "платно"),
           ("бесплатный", "платный"), ("бесплатная", "платная"), ("бесплатное", "платное"), ("до", "после"),
           ("больше", "меньше"), ("более", "менее"), ("выше", "ниже"), ("открыт", "закрыт"), ("открыта", "закрыта"),
           ("открыто", "закрыто"), ("работает", "не работает"), ("обязательно", "необязательно"),
           ("допустимо", "недопустимо"), ("возможно", "невозможно"), ("минимум", "максимум"),
           ("минимальный", "максимальный"), ("всегда", "никогда"), ("входит", "не входит"),
           ("принимаются", "не принимаются"), ("принимается", "не принимается"), ("может", "не может"),
           ("могут", "не могут"), ("должен", "не должен"), ("должны", "не должны"), ("является", "не является"),
           ("есть", "нет"), ("увеличивается", "уменьшается"), ("растёт", "падает"), ("раньше", "позже"),
           ("включая", "кроме"), ("первый", "последний"), ("нужно", "не нужно"),
           ("требуется", "не требуется"), ("выдаётся", "не выдаётся"), ("предоставляется", "не предоставляется"),
           ("возвращается", "не возвращается"), ("взимается", "не взимается")],
    "zh": [("可以", "不可以"), ("能", "不能"), ("允许", "禁止"), ("免费", "收费"), ("之前", "之后"), ("以前", "以后"),
           ("多", "少"), ("增加", "减少"), ("提高", "降低"), ("开放", "关闭"), ("需要", "不需要"), ("必须", "无须"),
           ("包括", "不包括"), ("有", "没有"), ("是", "不是"), ("最多", "最少"), ("以上", "以下"), ("高于", "低于"),
           ("上涨", "下跌"), ("增长", "下降"), ("支持", "不支持"), ("提供", "不提供"), ("接受", "不接受"),
           ("会", "不会"), ("应", "不应"), ("已", "未"), ("成功", "失败"), ("同意", "反对"), ("早", "晚")],
}
_RESTRICTIONS = {
    "en": ["members of the loyalty programme", "customers on the premium plan", "residents of the city",
           "orders placed online", "weekdays", "holders of a valid student card", "the first three months",
           "accounts opened after 2020", "applicants over 18", "the main branch"],
    "ru": ["участников программы лояльности", "клиентов на тарифе «Премиум»", "жителей города",
           "заказов через сайт", "будних дней", "студентов с действующим билетом", "первых трёх месяцев",
           "договоров после 2020 года", "заявителей старше 18 лет", "главного офиса"],
    "zh": ["会员", "高级套餐用户", "本市居民", "网上订单", "工作日", "持有效学生证的读者", "前三个月",
           "2020年以后开户的账户", "年满18周岁的申请人", "总部"],
}
_ONLY = {"en": ", but only for {}", "ru": ", но только для {}", "zh": "，但仅限{}"}
_SUPPORT = 0.4  # share of an answer sentence's content words that its supporting context sentence holds


@dataclass(frozen=True)
class Spot:
    start: int
    end: int
    word: str
    replacement: str


def _table(language: str) -> dict[str, str]:
    table = {}
    for a, b in _PAIRS[language]:
        table.setdefault(a, b)
        table.setdefault(b, a)
    return table


_TABLES = {language: _table(language) for language in _PAIRS}


def spots(text: str, language: str) -> list[Spot]:
    """Every flippable word of ``text`` and what it flips to."""
    table = _TABLES[language]
    if language == "zh":
        return [Spot(s, e, w, table[w]) for w, s, e in jieba_module().tokenize(text) if w in table]
    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"[^\W\d_]+(?:-[^\W\d_]+)*", text)]
    out, i = [], 0
    while i < len(words):
        start, end, word = words[i]
        if i + 1 < len(words) and text[end:words[i + 1][0]] == " " and f"{word} {words[i + 1][2]}".lower() in table:
            word, end, i = f"{word} {words[i + 1][2]}", words[i + 1][1], i + 1  # "is not", "не работает"
        i += 1
        if word.lower() in table:
            replacement = table[word.lower()]
            if word[0].isupper():
                replacement = replacement[0].upper() + replacement[1:]
            out.append(Spot(start, end, word, replacement))
    return out


def _replace(text: str, spot: Spot) -> str:
    return text[:spot.start] + spot.replacement + text[spot.end:]


def _content(text: str, language: str) -> set[str]:
    stop = stopwords(language)
    return {t.text for t in terms(text, language) if t.text not in stop and (len(t.text) > 1 or language == "zh")}


@dataclass
class _Sentence:
    context: int  # index of the context it is in
    start: int
    end: int
    text: str


def _context_sentences(contexts: list[str]) -> list[_Sentence]:
    return [_Sentence(i, s.start, s.end, s.text) for i, c in enumerate(contexts) for s in split_sentences(c)]


def _edit_contexts(contexts: list[str], edits: list[tuple[_Sentence, str]]) -> list[str]:
    out = list(contexts)
    for sentence, new in sorted(edits, key=lambda e: (e[0].context, -e[0].start)):
        c = out[sentence.context]
        out[sentence.context] = c[:sentence.start] + new + c[sentence.end:]
    return out


def twins(example: dict, rng: random.Random) -> list[dict]:
    """Polarity and restriction twins of one faithful example (label 0), each a new example."""
    language, answer, contexts = example["language"], example["answer"], example["contexts"]
    if example["label"] != 0 or language not in _PAIRS:
        return []
    context_sentences = _context_sentences(contexts)
    words = [_content(c.text, language) for c in context_sentences]
    candidates = []
    for sentence in split_sentences(answer):
        content = _content(sentence.text, language)
        if len(content) < 3:
            continue
        support = [k for k, w in enumerate(words) if len(content & w) >= _SUPPORT * len(content)]
        if support:
            candidates.append((sentence, support))
    if not candidates:
        return []
    sentence, support = rng.choice(candidates)
    out = []

    def make(suffix: str, label: int, new_answer: str, new_contexts: list[str], spans: list[list[int]]) -> dict:
        return {**{k: example[k] for k in ("question", "language")}, "id": f"{example['id']}:{suffix}",
                "source": f"{example['source'].split('+')[0]}+{suffix.rstrip('0123456789')}", "contexts": new_contexts,
                "answer": new_answer, "label": label, "spans": spans, **({"fold": example["fold"]} if "fold" in example else {})}

    # polarity: a word the answer sentence and every supporting context sentence share
    answer_spots = [s for s in spots(sentence.text, language)]
    rng.shuffle(answer_spots)
    for spot in answer_spots:
        ctx_edits = []
        for k in support:
            c = context_sentences[k]
            same = [s for s in spots(c.text, language) if s.word.lower() == spot.word.lower()]
            if same:
                ctx_edits.append((c, _replace(c.text, same[0])))
        if len(ctx_edits) != len(support):
            continue  # a supporting sentence without the word would still support the answer
        a_start = sentence.start + spot.start
        flipped = answer[:a_start] + spot.replacement + answer[sentence.start + spot.end:]
        new_span = [a_start, a_start + len(spot.replacement)]
        flipped_contexts = _edit_contexts(contexts, ctx_edits)
        out.append(make("flip_answer", 1, flipped, contexts, [new_span]))
        out.append(make("flip_context", 1, answer, flipped_contexts, [[a_start, sentence.start + spot.end]]))
        out.append(make("flip_both", 0, flipped, flipped_contexts, []))
        break

    # scope: a restriction on the supporting sentence, missing from the answer (or stated in both)
    if rng.random() < 0.6:
        clause = _ONLY[language].format(rng.choice(_RESTRICTIONS[language]))
        ctx_edits = [(context_sentences[k], _restrict(context_sentences[k].text, clause)) for k in support]
        restricted = _edit_contexts(contexts, ctx_edits)
        out.append(make("restrict_context", 1, answer, restricted, [[sentence.start, sentence.end]]))
        both = answer[:sentence.start] + _restrict(sentence.text, clause) + answer[sentence.end:]
        out.append(make("restrict_both", 0, both, restricted, []))
    return out


def _restrict(sentence: str, clause: str) -> str:
    body = sentence.rstrip()
    end = len(body)
    while end and body[end - 1] in ".!?。！？；;":
        end -= 1
    return body[:end] + clause + body[end:]
