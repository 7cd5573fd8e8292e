"""groundtrace.evaluators.mlflow_scorer inside `mlflow.genai.evaluate`, on a real MLflow sqlite store: the
Feedback of each row is read back from its trace (lexical values by hand: the copy of the only context
1.0, no keyword found 0.0). Contexts come from the trace's retriever span when the app is traced, else
from inputs["contexts"]."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("mlflow.genai")

from groundtrace.evaluators import mlflow_scorer  # noqa: E402

CONTEXT = "The library opens at nine every morning."
ZEBRAS = "Zebras gallop quickly across savannas."
ZEBRAS_REASON = ("grounding 0.00: 0% of the answer's keywords occur in the contexts, BLEU 0.00; 3 keyword(s) not "
                 "found in any context: gallop, savannas, zebras")
ZEBRAS_SPANS = [{"start": 0, "end": 6, "text": "Zebras", "label": "unexpected word"},
                {"start": 7, "end": 13, "text": "gallop", "label": "unexpected word"},
                {"start": 29, "end": 37, "text": "savannas", "label": "unexpected word"}]


@pytest.fixture(scope="module", autouse=True)
def sqlite_store(tmp_path_factory) -> Iterator[str]:
    previous = mlflow.get_tracking_uri()
    folder = tmp_path_factory.mktemp("mlflow-eval")
    uri = f"sqlite:///{folder}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("groundtrace-evaluate", (folder / "artifacts").as_uri()))
    yield uri
    mlflow.set_tracking_uri(previous)


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
        {"inputs": {"question": "When does the library open?", "contexts": [CONTEXT]}, "outputs": {"answer": CONTEXT}},
        {"inputs": {"question": "What lives on the savanna?", "contexts": [CONTEXT]}, "outputs": ZEBRAS},
    ]
    result = mlflow.genai.evaluate(data=data, scorers=[mlflow_scorer("lexical")])

    found = feedback_by_question(result)
    library, savanna = found["When does the library open?"], found["What lives on the savanna?"]
    assert (library.value, library.rationale) == (1.0, "grounding 1.00: 100% of the answer's keywords occur in the "
                                                       "contexts, BLEU 1.00")
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
