"""The requests the platform source tests trace with each platform's own LangChain
tracer: three RAG questions through lc_app's chain (a vector retriever, k=2, then a fake chat
model), then two that are not RAG requests: a chain without retrieval and a bare retrieval."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integrations" / "langchain" / "tests"))
from langchain_core.runnables import RunnableLambda  # noqa: E402
from lc_app import rag_chain, vector_retriever  # noqa: E402

QUESTIONS = ["What is the capital of France?", "When was the Eiffel Tower completed?",
             "What is the capital of Russia?"]
ANSWERS = ["Paris is the capital of France.", "It was completed in 1889.", "Moscow is the capital of Russia."]


def retrieved(question: str) -> list[str]:
    """What the app's retriever returns for a question (looked up untraced)."""
    return [d.page_content for d in vector_retriever(k=2).invoke(question)]


def run_requests(callbacks: list[Any], metadata: Callable[[int], dict[str, Any]]) -> list[tuple[str, list[str], str]]:
    """Run the five requests with ``callbacks``, RAG request i with ``metadata(i)``; return the
    question, documents and answer each RAG request used."""
    used = []
    for i, (question, answer) in enumerate(zip(QUESTIONS, ANSWERS, strict=True)):
        documents = retrieved(question)
        config = {"callbacks": callbacks, "metadata": metadata(i)}
        used.append((question, documents, rag_chain(answer, retriever=vector_retriever(k=2)).invoke(question, config=config)))
        time.sleep(0.01)  # distinct start times
    RunnableLambda(lambda q: f"echo {q}", name="echo").invoke("hello", config={"callbacks": callbacks})
    vector_retriever().invoke("What is the capital of France?", config={"callbacks": callbacks})
    return used
