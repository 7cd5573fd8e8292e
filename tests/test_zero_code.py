"""No code change at all: an application that never imports groundtrace, run under groundtrace-run
(GROUNDTRACE_ENABLED=1 and GROUNDTRACE_* settings), gets every answer scored and written out."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LAUNCHER = Path(sys.executable).with_name("groundtrace-run")

LANGCHAIN_APP = """
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from langchain_core.retrievers import BaseRetriever

DOCS = [Document(page_content="Items can be returned within 30 days of delivery.")]

class Retriever(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        return DOCS

prompt = ChatPromptTemplate.from_template("Context: {context}\\nQuestion: {question}")
model = FakeListChatModel(responses=["You can return items within 90 days."])
chain = ({"context": Retriever(), "question": RunnablePassthrough()} | prompt | model | StrOutputParser())
print(chain.invoke("How long do I have to return an item?"))
"""

LLAMAINDEX_APP = """
from llama_index.core import Document, MockEmbedding, VectorStoreIndex
from llama_index.core.llms import CustomLLM, CompletionResponse, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

class Fixed(CustomLLM):
    @property
    def metadata(self):
        return LLMMetadata()
    @llm_completion_callback()
    def complete(self, prompt, formatted=False, **kwargs):
        return CompletionResponse(text="You can return items within 90 days.")
    @llm_completion_callback()
    def stream_complete(self, prompt, formatted=False, **kwargs):
        yield CompletionResponse(text="You can return items within 90 days.", delta="You can return items within 90 days.")

index = VectorStoreIndex.from_documents([Document(text="Items can be returned within 30 days of delivery.")],
                                        embed_model=MockEmbedding(embed_dim=8))
print(index.as_query_engine(llm=Fixed()).query("How long do I have to return an item?"))
"""


@pytest.mark.parametrize("app", [LANGCHAIN_APP, LLAMAINDEX_APP], ids=["langchain", "llamaindex"])
def test_an_unchanged_app_is_scored_under_the_launcher(app, tmp_path):
    (tmp_path / "app.py").write_text(textwrap.dedent(app))
    out = tmp_path / "scores.jsonl"
    env = {**os.environ, "GROUNDTRACE_SINKS": "jsonl", "GROUNDTRACE_METRICS": "lexical,facts",
           "GROUNDTRACE_JSONL_PATH": str(out)}
    env.pop("GROUNDTRACE_ENABLED", None)
    result = subprocess.run([str(LAUNCHER), sys.executable, "app.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "90 days" in result.stdout
    (line,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["record"]["question"] == "How long do I have to return an item?"
    assert line["record"]["contexts"] == ["Items can be returned within 30 days of delivery."]
    assert line["record"]["answer"] == "You can return items within 90 days."
    facts = {s["metric"]: s for s in line["scores"]}["facts"]
    assert facts["hallucinated"] is True and [s["text"] for s in facts["spans"]] == ["90 days"]


@pytest.mark.parametrize("app", [LANGCHAIN_APP, LLAMAINDEX_APP], ids=["langchain", "llamaindex"])
def test_groundtrace_mask_applies_under_the_launcher(app, tmp_path):
    """Configuration without code reaches the shared Monitor through the settings: the mask too."""
    (tmp_path / "app.py").write_text(textwrap.dedent(app))
    out = tmp_path / "scores.jsonl"
    env = {**os.environ, "GROUNDTRACE_SINKS": "jsonl", "GROUNDTRACE_METRICS": "lexical",
           "GROUNDTRACE_JSONL_PATH": str(out), "GROUNDTRACE_MASK": "builtins:str.upper"}
    env.pop("GROUNDTRACE_ENABLED", None)
    result = subprocess.run([str(LAUNCHER), sys.executable, "app.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "You can return items within 90 days." in result.stdout  # the application's own answer is untouched
    (line,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["record"]["question"] == "HOW LONG DO I HAVE TO RETURN AN ITEM?"
    assert line["record"]["contexts"] == ["ITEMS CAN BE RETURNED WITHIN 30 DAYS OF DELIVERY."]
    assert line["record"]["answer"] == "YOU CAN RETURN ITEMS WITHIN 90 DAYS."


def test_the_same_app_without_the_launcher_writes_nothing(tmp_path):
    (tmp_path / "app.py").write_text(textwrap.dedent(LANGCHAIN_APP))
    out = tmp_path / "scores.jsonl"
    env = {**os.environ, "GROUNDTRACE_SINKS": "jsonl", "GROUNDTRACE_JSONL_PATH": str(out)}
    env.pop("GROUNDTRACE_ENABLED", None)
    result = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert not out.exists()
