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
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from groundtrace.text import words
from groundtrace.text.facts import extract_facts

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its two halves, when run or loaded by path
from synth_edits import (  # noqa: E402
    baseless_sentence, change_date, change_entity, change_number, drop_condition, merge, negate, paraphrase,
)
from synth_sources import (  # noqa: E402
    DATA_DIR, HALUEVAL_WHEEL, KIND_WEIGHTS, LANGUAGES, NEIGHBOURS, SENTENCE_COUNTS, Passage, Sentence, load_sources,
    nearest_neighbours, prepare,
)


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
