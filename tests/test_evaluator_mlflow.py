"""groundtrace.evaluators.mlflow_scorer inside `mlflow.genai.evaluate`, on a real MLflow sqlite store: the
Feedback of each row is read back from its trace (lexical values by hand: tests/hand_checked.py). Contexts
come from the trace's retriever span when the app is traced, else from inputs["contexts"]."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("mlflow.genai")

from groundtrace.evaluators import mlflow_scorer  # noqa: E402
from tests.hand_checked import CONTEXT, COPY, COPY_REASON, ZEBRAS, ZEBRAS_REASON, ZEBRAS_SPANS  # noqa: E402
from tests.mlflow_store import sqlite_tracking  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def sqlite_store(tmp_path_factory) -> Iterator[str]:
    with sqlite_tracking(tmp_path_factory.mktemp("mlflow-eval"), "groundtrace-evaluate") as uri:
        yield uri


def feedback_by_question(result) -> dict[str, dict]:
    """The lexical Feedback of every evaluated row, read back from the store, by the row's question."""
    found = {}
    for trace in mlflow.search_traces(run_id=result.run_id, return_type="list"):
        question = json.loads(trace.data.request)["question"]
        [assessment] = [a for a in mlflow.get_trace(trace.info.trace_id).info.assessments if a.name == "lexical"]
        found[question] = assessment
    return found


def test_rows_with_inputs_and_outputs_get_a_feedback_with_value_rationale_and_spans() -> None:
    data = [
        {"inputs": {"question": "When does the library open?", "contexts": [CONTEXT]}, "outputs": {"answer": COPY}},
        {"inputs": {"question": "What lives on the savanna?", "contexts": [CONTEXT]}, "outputs": ZEBRAS},
    ]
    result = mlflow.genai.evaluate(data=data, scorers=[mlflow_scorer("lexical")])

    found = feedback_by_question(result)
    library, savanna = found["When does the library open?"], found["What lives on the savanna?"]
    assert (library.value, library.rationale) == (1.0, COPY_REASON)
    assert (savanna.value, savanna.rationale) == (0.0, ZEBRAS_REASON)
    assert savanna.source.source_type == "CODE" and savanna.source.source_id == "groundtrace"
    assert {k: savanna.metadata[k] for k in ("label", "hallucinated", "threshold", "higher_is_better")} == {
        "label": "hallucinated", "hallucinated": "true", "threshold": "0.4", "higher_is_better": "true"}
    assert json.loads(savanna.metadata["unsupported_spans"]) == ZEBRAS_SPANS
    assert json.loads(library.metadata["unsupported_spans"]) == []
    assert result.metrics["lexical/mean"] == pytest.approx(0.5)


@mlflow.trace(span_type="RETRIEVER")
def retrieve(question: str) -> list[dict]:
    return [{"page_content": CONTEXT, "metadata": {"source": "library.md"}}]


@mlflow.trace
def rag_app(question: str) -> dict:
    """A traced RAG app: its contexts are only in the retriever span, not in its inputs or outputs."""
    documents = retrieve(question)
    return {"answer": documents[0]["page_content"] if "library" in question else ZEBRAS}


def test_a_traced_app_gets_its_contexts_from_the_retriever_span() -> None:
    data = [{"inputs": {"question": "When does the library open?"}}, {"inputs": {"question": "What lives on the savanna?"}}]
    result = mlflow.genai.evaluate(data=data, predict_fn=rag_app, scorers=[mlflow_scorer("lexical")])

    found = feedback_by_question(result)
    assert found["When does the library open?"].value == 1.0
    assert (found["What lives on the savanna?"].value, found["What lives on the savanna?"].rationale) == (0.0, ZEBRAS_REASON)


def test_a_row_without_contexts_gets_an_error_feedback_that_says_where_it_looked() -> None:
    data = [{"inputs": {"question": "When does the library open?"}, "outputs": {"answer": CONTEXT}}]
    result = mlflow.genai.evaluate(data=data, scorers=[mlflow_scorer("lexical")])

    [assessment] = feedback_by_question(result).values()
    assert assessment.value is None
    assert assessment.error.error_code == "GROUNDTRACE_METRIC_ERROR"
    assert assessment.error.error_message == (
        "no contexts: neither outputs nor inputs hold 'contexts' or 'documents' (keys: answer / question): "
        "return {'answer': str, 'contexts': [str, ...]} (or 'output' and 'documents')")
