"""The rule edits of synthetic answers: paraphrases that keep the meaning (synonyms, number and date formats,
clause order) and the errors injected (a changed number, date or name, a negation, a dropped condition, a
baseless sentence)."""

from __future__ import annotations

import functools
import random
import re


from synth_sources import Passage, Sentence

from groundtrace.text import words
from groundtrace.text.facts import extract_facts
from groundtrace.text.numbers import NUMBER, find_dates, find_quantities, parse_number
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import jieba_module


SYNONYMS = {
    "en": {"approximately": "about", "around": "about", "located": "situated", "began": "started",
           "started": "began", "because": "since", "largest": "biggest", "famous": "well-known",
           "several": "a number of", "film": "movie", "movie": "film", "purchase": "buy", "said": "stated",
           "however": "still", "also": "as well as that", "known as": "called", "in addition": "also",
           "died": "passed away", "help": "assist", "received": "was given"},
    "ru": {"можно": "разрешается", "необходимо": "нужно", "нужно": "необходимо", "в течение": "на протяжении",
           "не более": "не больше", "не больше": "не более", "около": "примерно", "примерно": "около",
           "однако": "но", "только": "лишь", "лишь": "только", "выдаётся": "предоставляется",
           "предоставляется": "выдаётся", "также": "кроме того", "сообщают": "уведомляют", "бесплатно": "без оплаты"},
    "zh": {"可以": "能够", "能够": "可以", "必须": "须", "大约": "约", "通知": "告知", "但是": "不过",
           "如果": "若", "以及": "和", "并且": "而且", "目前": "当前", "已经": "已", "包括": "包含",
           "表示": "称", "据悉": "据了解", "进行": "开展"},
}
CONNECTIVES = {"en": [", and ", "; in addition, ", "; moreover, ", ", while "],
               "ru": [", а также ", "; кроме того, ", ", причём ", ", при этом "],
               "zh": ["，并且", "；此外，", "，同时", "；另外，"]}
# A tail clause with one of these is a condition or a negation: trimming it would change the meaning.
CONDITION_MARKERS = {
    "en": r"\b(?:if|unless|provided|as long as|except|but not|only|not|never|no)\b",
    "ru": r"(?<![^\W\d_])(?:если|при|кроме|исключением|но не|только|лишь|не|нет|нельзя)(?![^\W\d_])",
    "zh": r"如果|若|须|需|必须|仅|只|除|但|不|没|未|无|才",
}
CONDITION_CLAUSES = {  # (leading clause, inner or trailing clause) that can be dropped whole
    "en": (r"^(?:Only )?(?:If|Unless) [^,]{4,}, ",
           r"(?:,\s*|\s+)(?:only\s+)?(?:if|unless|provided that|as long as|except|but not|only when|only for)\b[^,.;]*"),
    "ru": (r"^(?:Только )?(?:Если|При условии|При наличии) [^,]{4,}, (?:то )?",
           (r",\s*(?:и\s+|но\s+|а\s+)?(?:только\s+|лишь\s+)?(?:если|при условии|при наличии|кроме|за исключением|"
            r"но не|только при|только для|только в|только на|только после|не позднее)(?![^\W\d_])[^,.;]*")),
    "zh": (r"^(?:如果|若|如|凡是?)[^，。]{2,}，", r"[，,](?:但|但是|须|需|必须|仅限|仅|除|如果|若|凡)[^，。；]*"),
}


def apply_synonyms(text: str, language: str, rng: random.Random) -> tuple[str, bool]:
    """Swap at most two words or phrases for synonyms from the language's small table."""
    table = SYNONYMS[language]
    boundary = "" if language == "zh" else r"(?<![^\W_]){}(?![^\W_])"
    found = [m for phrase in table for m in re.finditer(boundary.format(re.escape(phrase)) if boundary
                                                        else re.escape(phrase), text, re.IGNORECASE)]
    if not found:
        return text, False
    changed = False
    for m in sorted(rng.sample(found, min(2, len(found))), key=lambda m: -m.start()):
        if any(o is not m and o.start() < m.end() and m.start() < o.end() for o in found):
            continue  # overlapping phrases ("не более" and "более"): leave them alone
        word = table[m.group().lower()]
        if m.group()[0].isupper():
            word = word[0].upper() + word[1:]
        text = text[: m.start()] + word + text[m.end() :]
        changed = True
    return text, changed


def drop_parenthesised(text: str) -> tuple[str, bool]:
    new = re.sub(r"\s*[(（][^()（）]{1,80}[)）]", "", text)
    new = re.sub(r",\s*,", ",", new)  # "York, (born 1960), is" -> "York, is"
    return new, new != text


def reformat_numbers(text: str, language: str) -> tuple[str, bool]:
    """Write big plain numbers another way: 12345 <-> 12,345 (en), 12 345 (ru), 3万 (zh)."""
    def rewrite(m: re.Match[str]) -> str:
        digits = re.sub(r"[ ,\u00a0]", "", m.group())
        value = int(digits)
        if 1000 <= value <= 2100:  # a year: leave it as written
            return m.group()
        if "," in m.group() or " " in m.group() or "\u00a0" in m.group():
            return digits
        if language == "zh":
            return f"{value // 10000}万" if value % 10000 == 0 and text[m.end():m.end() + 1] not in "万亿" else digits
        return f"{value:,}".replace(",", " " if language == "ru" else ",")

    new = re.sub(r"(?<![\d.,])\d{1,3}(?:[, \u00a0]\d{3})+(?![\d.,]\d)|(?<![\d.,])\d{4,}(?![\d.,]\d)", rewrite, text)
    return new, new != text


MONTH_NAMES = "January February March April May June July August September October November December".split()


def reword_dates(text: str, language: str) -> tuple[str, bool]:
    """'March 13, 1972' <-> '13 March 1972'; '2024 года' <-> '2024 г.'."""
    months = "|".join(MONTH_NAMES)
    if language == "en":
        new = re.sub(rf"\b({months}) (\d{{1,2}}), (\d{{4}})\b", r"\2 \1 \3", text)
        if new == text:
            new = re.sub(rf"\b(\d{{1,2}}) ({months}) (\d{{4}})\b", r"\2 \1, \3", text)
    elif language == "ru":
        new = re.sub(r"\b(\d{4}) года\b", r"\1 г.", text)
    else:
        new = re.sub(r"(\d{1,2})日", r"\1号", text)
    return new, new != text


def reorder_condition(text: str, language: str) -> tuple[str, bool]:
    """'If X, Y.' -> 'Y if X.' (and the Russian 'Если X, Y.' -> 'Y, если X.')."""
    patterns = {"en": (r"^If ([^,]{4,}), (.+)([.!?])$", "{main} if {cond}{end}"),
                "ru": (r"^Если ([^,]{4,}), (?:то )?(.+)([.!?])$", "{main}, если {cond}{end}")}
    if language not in patterns:
        return text, False
    m = re.match(patterns[language][0], text)
    if not m:
        return text, False
    main = m.group(2)
    return patterns[language][1].format(main=main[0].upper() + main[1:], cond=m.group(1), end=m.group(3)), True


def trim_to_clause(text: str, language: str) -> tuple[str, bool]:
    """Drop the last clause of a long sentence, unless it states a condition or a negation."""
    separator = "，" if language == "zh" else ", "
    clauses = text.split(separator)
    if len(clauses) < 3 or re.search(CONDITION_MARKERS[language], clauses[-1], re.IGNORECASE):
        return text, False
    if re.search(CONDITION_MARKERS[language], clauses[-2][:12], re.IGNORECASE):
        return text, False
    end = text[-1]
    return separator.join(clauses[:-1]).rstrip(",;，；") + end, True


def paraphrase(text: str, language: str, rng: random.Random) -> tuple[str, list[str]]:
    """The sentence rewritten by the rule-based operations that happen to apply (each at some rate)."""
    ops = []
    steps = [("drop_parenthesised", 0.8, lambda t: drop_parenthesised(t)),
             ("reorder_clauses", 0.7, lambda t: reorder_condition(t, language)),
             ("trim_to_clause", 0.35, lambda t: trim_to_clause(t, language)),
             ("synonyms", 0.7, lambda t: apply_synonyms(t, language, rng)),
             ("number_format", 0.6, lambda t: reformat_numbers(t, language)),
             ("date_wording", 0.6, lambda t: reword_dates(t, language))]
    for name, rate, step in steps:
        if rng.random() < rate:
            text, changed = step(text)
            if changed:
                ops.append(name)
    return text, ops


def can_lowercase(word: str, language: str, contexts: list[str]) -> bool:
    """A sentence's first word may go lower case unless it is a name: capitalised inside a sentence somewhere."""
    if language == "zh" or word.isupper():
        return False
    return word.lower() in stopwords(language) or not any(
        re.search(rf"[^\W\d_][,;:]?\s+{re.escape(word)}(?![^\W\d_])", c) for c in contexts)


def merge(first: Sentence, second: Sentence, language: str, contexts: list[str], rng: random.Random) -> Sentence:
    """Join two sentences with a connective; spans move with their text."""
    head = first.text.rstrip(".!?。！？")
    tail = second.text
    first_word = re.match(r"[^\W\d_]+", tail)
    if first_word and can_lowercase(first_word.group(), language, contexts):
        tail = tail[0].lower() + tail[1:]
    connective = rng.choice(CONNECTIVES[language])
    span = None
    if first.span:
        span = (first.span[0], min(first.span[1], len(head)), first.span[2])
    if second.span:
        shift = len(head) + len(connective)
        span = (second.span[0] + shift, second.span[1] + shift, second.span[2])
    return Sentence(head + connective + tail, span)


# -------------------------------------------------------------------------------------- injections


def context_numbers(contexts: list[str], language: str) -> set[float]:
    """Every number the contexts state, with and without its multiplier ("3,5 млн" gives 3.5 and 3500000)."""
    values = {q.value for c in contexts for q in find_quantities(c, language)}
    for c in contexts:
        for m in re.finditer(NUMBER, c):
            value = parse_number(m.group(), language)
            if value is not None:
                values.add(value)
    return values


def new_number(value: float, rng: random.Random, taken: set[float]) -> float | None:
    """A plausible different value: near for small counts, scaled and rounded like the original otherwise."""
    for _ in range(20):
        if value.is_integer() and abs(value) < 10:
            candidate = float(rng.randint(1, 12))
        else:
            candidate = value * rng.choice([0.5, 0.6, 0.75, 1.25, 1.5, 2.0, 3.0])
            if value.is_integer():
                zeros = len(str(int(value))) - len(str(int(value)).rstrip("0"))
                candidate = float(round(candidate, -zeros) if zeros else round(candidate))
        if candidate != value and candidate > 0 and candidate not in taken:
            return candidate
    return None


def format_like(original: str, value: float, language: str) -> str:
    """The new value written the way the original number was (decimal mark, places, grouping)."""
    mark = "," if language in ("ru",) and "," in original else "."
    places = len(re.split(r"[.,]", original)[-1]) if re.search(r"\d[.,]\d{1,2}$", original) else 0
    text = f"{value:.{places}f}"
    if re.search(r"\d[ \u00a0,]\d{3}", original) and not places:
        separator = re.search(r"\d([ \u00a0,])\d{3}", original).group(1)
        text = f"{int(value):,}".replace(",", separator)
    return text.replace(".", mark)


def change_number(sentence: str, language: str, contexts: list[str], rng: random.Random) -> Sentence | None:
    taken = context_numbers(contexts, language)
    candidates = [f for f in extract_facts(sentence, language, discover_names=False) if f.kind == "number"]
    rng.shuffle(candidates)
    for fact in candidates:
        m = re.search(NUMBER, sentence[fact.start : fact.end])
        if not m:
            continue
        old = parse_number(m.group(), language)
        value = new_number(old, rng, taken) if old is not None else None
        if value is None:
            continue
        text = format_like(m.group(), value, language)
        start = fact.start + m.start()
        changed = sentence[:start] + text + sentence[start + len(m.group()) :]
        if parse_number(text, language) in taken:
            continue
        return Sentence(changed, (start, start + len(text), "number"))
    return None


def change_date(sentence: str, language: str, contexts: list[str], rng: random.Random) -> Sentence | None:
    """Move a date's year (or, without a year, its day) so that the contexts state no such date."""
    taken = context_numbers(contexts, language)
    stated = {d.key for c in contexts for d in find_dates(c, language)}
    dates = find_dates(sentence, language)
    rng.shuffle(dates)
    for date in dates:
        original = sentence[date.start : date.end]
        if date.year:
            years = [y for y in range(date.year - 6, date.year + 7) if y != date.year and y not in taken and y <= 2024]
            if not years:
                continue
            new = original.replace(str(date.year), str(rng.choice(years)), 1)
        else:
            numbers = list(re.finditer(r"\d{1,2}", original))
            day = numbers[-1] if language == "zh" and numbers else (numbers[0] if numbers else None)  # 3月8日: the day is last
            days = [d for d in range(1, 29) if d not in taken]
            if not day or not days:
                continue
            new = original[: day.start()] + str(rng.choice(days)) + original[day.end() :]
        if new != original and all(d.key not in stated for d in find_dates(new, language)):
            changed = sentence[: date.start] + new + sentence[date.end :]
            return Sentence(changed, (date.start, date.start + len(new), "date"))
    return None


def change_entity(sentence: str, language: str, contexts: list[str], donors: list[Passage],
                  rng: random.Random) -> Sentence | None:
    """Swap a name for a name of a near passage that the contexts never mention."""
    joined = "\n".join(contexts).casefold()
    names = [f for f in extract_facts(sentence, language, discover_names=False) if f.kind == "name"]
    replacements = [f.text for p in donors for f in extract_facts(p.text[:800], language, discover_names=False)
                    if f.kind == "name" and f.text.casefold() not in joined]
    rng.shuffle(names)
    for name in names:
        words_in_name = len(name.text.split())
        fitting = [r for r in dict.fromkeys(replacements) if len(r.split()) == words_in_name and r != name.text]
        if fitting:
            new = rng.choice(fitting)
            return Sentence(sentence[: name.start] + new + sentence[name.end :], (name.start, name.start + len(new), "entity"))
    return None


EN_AUXILIARIES = r"\b(is|are|was|were|can|will|could|would|should|must|has been|have been|had been)\b(?! not\b|n't)"
RU_VERBS = (r"(?<![^\W\d_])(?<!не )(может|могут|должен|должна|должны|является|являются|был|была|было|были|будет|будут|"
            r"составляет|составляют|действует|действуют|принимает|принимают|входит|входят|имеет|имеют|работает|"
            r"работают|[а-яё]{3,}(?:ется|ются|ится|ятся|ался|алась|алось|ались|ился|илась|илось|ились)|стоит|стоят|[а-яё]{3,}ётся)(?![^\W\d_])")
ZH_NEGATIONS = {"可以": "不可以", "能够": "不能够", "能": "不能", "会": "不会", "需要": "不需要", "须": "无须",
                "应当": "不应当", "应": "不应", "是": "不是", "有": "没有", "已经": "尚未", "已": "未", "将": "不会"}


def negate(sentence: str, language: str, rng: random.Random) -> Sentence | None:
    """Negate one predicate; the span is the negated predicate ('is not', 'не выдаётся', '不可以')."""
    if language == "zh":
        spots = [(s, e, ZH_NEGATIONS[w]) for w, s, e in jieba_module().tokenize(sentence) if w in ZH_NEGATIONS]
    else:
        pattern = EN_AUXILIARIES if language == "en" else RU_VERBS
        spots = []
        for m in re.finditer(pattern, sentence, re.IGNORECASE if language == "en" else 0):
            word = m.group()
            if language == "en":
                new = {"can": "cannot", "Can": "Cannot"}.get(word, word.split()[0] + " not" + word[len(word.split()[0]):])
            else:
                new = "нельзя" if word == "можно" else "не " + word
            spots.append((m.start(), m.end(), new))
    if not spots:
        return None
    start, end, new = rng.choice(spots)
    return Sentence(sentence[:start] + new + sentence[end:], (start, start + len(new), "negation"))


def drop_condition(sentence: str, language: str) -> Sentence | None:
    """Remove a condition clause; the whole shortened sentence is the span (it now claims too much)."""
    leading, inner = CONDITION_CLAUSES[language]
    m = re.match(leading, sentence)
    if m:
        rest = sentence[m.end() :]
        shortened = (rest[0].upper() + rest[1:]) if rest else rest
    else:
        m = re.search(inner, sentence, re.IGNORECASE if language == "en" else 0)
        if not m:
            return None
        shortened = sentence[: m.start()] + sentence[m.end() :]
    shortened = re.sub(r"\s+([,.;])", r"\1", shortened).strip()
    if len(shortened) < max(10, 0.45 * len(sentence)) or shortened == sentence:
        return None
    return Sentence(shortened, (0, len(shortened), "dropped_condition"))


@functools.lru_cache(maxsize=64)
def context_word_set(contexts: tuple[str, ...], language: str) -> frozenset[str]:
    return frozenset(words(" ".join(contexts), language))


def supported_fraction(sentence: str, contexts: list[str], language: str) -> float:
    """Share of the sentence's content words that the contexts contain."""
    stop = stopwords(language)
    content = [w for w in words(sentence, language) if w not in stop]
    if not content:
        return 1.0
    context_words = context_word_set(tuple(contexts), language)
    return sum(w in context_words for w in content) / len(content)


def baseless_sentence(donors: list[Passage], contexts: list[str], language: str, rng: random.Random) -> str | None:
    """A sentence of a near passage outside the contexts that the contexts do not already state."""
    # the most context-like candidate of the nearest donors: additions in real answers stay on topic
    scored = []
    for donor in donors[:3]:
        for sentence in donor.sentences:
            fraction = supported_fraction(sentence, contexts, language)
            if not any(sentence in c for c in contexts) and fraction < 0.75:
                scored.append((fraction + rng.random() * 0.2, sentence))
    return max(scored)[1] if scored else None


# ---------------------------------------------------------------------------------------- samples

