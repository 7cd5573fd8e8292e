"""The bundled demo corpus and question set (package data under groundtrace_demo/data/).

corpus.jsonl: one passage per line (id, lang, source, text): a customer-support policy of an
invented shop in English, and an invented university's student-services FAQ in Russian.
questions.jsonl: the questions, the passages that answer them (``sources``), and one recorded
answer each for the replay model, tagged ``faithful`` or ``planted`` with what was planted
(``planted.kind``, the exact answer text ``planted.text``, and a ``note`` on what the source says).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

TOP_K = 2  # passages retrieved per question, by both applications


@dataclass(frozen=True)
class Passage:
    id: str
    lang: str
    source: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    lang: str
    question: str
    sources: tuple[str, ...]
    answer: str
    tag: str  # "faithful" or "planted"
    planted: dict[str, str] | None = None

    @property
    def label(self) -> str:
        """'faithful', or 'planted: <kind>' for the table."""
        return f"planted: {self.planted['kind']}" if self.planted else self.tag


def _rows(name: str) -> list[dict[str, Any]]:
    text = (resources.files("groundtrace_demo") / "data" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def corpus() -> tuple[Passage, ...]:
    return tuple(Passage(**row) for row in _rows("corpus.jsonl"))


@cache
def questions() -> tuple[Question, ...]:
    return tuple(Question(**{**row, "sources": tuple(row["sources"])}) for row in _rows("questions.jsonl"))


def passages_in(lang: str) -> list[Passage]:
    return [p for p in corpus() if p.lang == lang]


def questions_in(lang: str) -> list[Question]:
    return [q for q in questions() if q.lang == lang]
