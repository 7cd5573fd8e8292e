"""Short synthetic RAG records in English, Russian and Chinese: a context of 1-3 sentences, an
answer of 1-2 sentences, some with a planted number the context does not support. Deterministic."""

from __future__ import annotations

import random

CITIES = {
    "en": ["Oslo", "Lima", "Perth", "Quito", "Dakar", "Hanoi"],
    "ru": ["Казань", "Омск", "Тверь", "Сочи", "Пермь", "Томск"],
    "zh": ["杭州", "成都", "西安", "南京", "苏州", "厦门"],
}
TEMPLATES = {
    "en": {
        "question": "How many bridges does {city} have?",
        "facts": ["{city} has {n} bridges.", "The oldest bridge in {city} was built in {year}.",
                  "Most of the bridges in {city} cross the main river."],
        "answer": ["{city} has {n} bridges.", "The oldest one was built in {year}."],
    },
    "ru": {
        "question": "Сколько мостов в городе {city}?",
        "facts": ["В городе {city} {n} мостов.", "Самый старый мост в городе {city} построен в {year} году.",
                  "Большинство мостов города {city} пересекают главную реку."],
        "answer": ["В городе {city} {n} мостов.", "Самый старый из них построен в {year} году."],
    },
    "zh": {
        "question": "{city}有多少座桥？",
        "facts": ["{city}有{n}座桥。", "{city}最古老的桥建于{year}年。", "{city}的大多数桥横跨主河。"],
        "answer": ["{city}有{n}座桥。", "最古老的桥建于{year}年。"],
    },
}


def records(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        language = ("en", "ru", "zh")[i % 3]
        t = TEMPLATES[language]
        values = {"city": rng.choice(CITIES[language]), "n": rng.randint(3, 90), "year": rng.randint(1200, 1950)}
        contexts = [" ".join(f.format(**values) for f in t["facts"][: rng.randint(1, 3)])]
        planted = rng.random() < 0.3
        answer_values = dict(values, n=values["n"] + rng.randint(100, 900)) if planted else values
        answer = " ".join(a.format(**answer_values) for a in t["answer"][: rng.randint(1, 2)])
        rows.append({"id": f"syn-{i}", "language": language, "question": t["question"].format(**values),
                     "contexts": contexts, "answer": answer, "label": int(planted)})
    return rows
