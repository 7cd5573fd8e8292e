"""groundtrace.evaluators.langsmith_evaluator inside `langsmith.evaluate`: the real SDK runs a dataset of
two examples through a target and the evaluator, against a loopback server that answers LangSmith's
dataset, example, experiment and run endpoints and keeps the feedback it is sent; the feedback payloads
are asserted whole (lexical values by hand: the copy of the only context 1.0, no keyword found 0.0)."""

from __future__ import annotations

import pytest

langsmith = pytest.importorskip("langsmith")

from groundtrace.evaluators import langsmith_evaluator  # noqa: E402
from tests.loopback import LoopbackServer  # noqa: E402

API_KEY = "lsv2_pt_test_secret_0123456789abcdef"
TENANT_ID = "a3bb189e-8bf9-4888-9912-ace4e6543002"
DATASET_ID = "5b0c8d2e-1f3a-4c5b-9d6e-7f8091a2b3c4"
EXPERIMENT_ID = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
EXAMPLE_IDS = ["0f1e2d3c-4b5a-4968-8776-655443322110", "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"]
CREATED = "2026-01-01T00:00:00Z"

DOCUMENTS = {"library": "The library opens at nine every morning.", "savanna": "The library opens at nine every morning."}
ANSWERS = {"library": "The library opens at nine every morning.", "savanna": "Zebras gallop quickly across savannas."}
EXAMPLES = [("When does the library open?", "library", "At nine."), ("What lives on the savanna?", "savanna", "Zebras.")]


def rag_app(inputs: dict) -> dict:
    """The application under evaluation: a retriever (a lookup) and a generator (a replay)."""
    topic = "library" if "library" in inputs["question"] else "savanna"
    return {"answer": ANSWERS[topic], "contexts": [DOCUMENTS[topic]]}


class FakeLangSmith:
    """LangSmith's endpoints that `langsmith.evaluate` uses, kept in memory."""

    def __init__(self) -> None:
        self.runs: dict[str, dict] = {}
        self.feedback: list[dict] = []
        self.experiment: dict = {}

    def respond(self, request):
        route = (request.method, request.path)
        if route == ("GET", "/info"):
            return 200, {"version": "0.12.40", "instance_flags": {}}
        if route == ("GET", "/datasets"):
            return 200, [{"id": DATASET_ID, "name": request.query["name"][0], "tenant_id": TENANT_ID,
                          "created_at": CREATED, "modified_at": CREATED, "data_type": "kv"}]
        if route == ("GET", "/examples"):
            offset = int(request.query.get("offset", ["0"])[0])
            examples = [{"id": EXAMPLE_IDS[i], "dataset_id": DATASET_ID, "created_at": CREATED, "modified_at": CREATED,
                         "inputs": {"question": question}, "outputs": {"reference": reference}}
                        for i, (question, _, reference) in enumerate(EXAMPLES)]
            return 200, examples[offset:]
        if route == ("POST", "/sessions"):
            self.experiment = {"id": EXPERIMENT_ID, "name": request.json["name"], "tenant_id": TENANT_ID,
                               "reference_dataset_id": DATASET_ID, "start_time": CREATED}
            return 200, self.experiment
        if route == ("PATCH", f"/sessions/{EXPERIMENT_ID}"):
            return 200, {**self.experiment, **request.json}
        if route == ("POST", "/runs"):
            self.runs[request.json["id"]] = request.json
            return 200, {}
        if request.method == "PATCH" and request.path.startswith("/runs/"):
            self.runs.setdefault(request.path.rsplit("/", 1)[1], {}).update(request.json)
            return 200, {}
        if route == ("POST", "/feedback"):
            self.feedback.append(request.json)
            return 200, {"id": request.json["id"]}
        return 404, {"detail": "Not Found"}


def test_the_evaluator_called_as_langsmith_calls_it_returns_key_score_and_comment() -> None:
    evaluate = langsmith_evaluator("lexical")
    result = evaluate(inputs={"question": "What lives on the savanna?"}, outputs=rag_app({"question": "savanna"}),
                      reference_outputs={"reference": "Zebras."})
    assert result == {
        "key": "lexical", "score": 0.0, "value": "hallucinated",
        "comment": "grounding 0.00: 0% of the answer's keywords occur in the contexts, BLEU 0.00; 3 keyword(s) not "
                   "found in any context: gallop, savannas, zebras",
        "extra": {"higher_is_better": True, "hallucinated": True, "threshold": 0.4, "unsupported_spans": [
            {"start": 0, "end": 6, "text": "Zebras", "label": "unexpected word"},
            {"start": 7, "end": 13, "text": "gallop", "label": "unexpected word"},
            {"start": 29, "end": 37, "text": "savannas", "label": "unexpected word"}]},
    }
    assert evaluate.__name__ == "lexical"


def test_a_target_that_returns_no_answer_gets_error_feedback_that_says_what_to_return() -> None:
    result = langsmith_evaluator("lexical")(inputs={"question": "q"}, outputs={"reply": "a", "docs": []})
    assert result == {
        "key": "lexical", "score": None, "value": "error",
        "comment": "the outputs hold no answer (keys: reply, docs): return {'answer': str, 'contexts': [str, ...]} "
                   "(or 'output' and 'documents')",
        "extra": {"higher_is_better": True, "hallucinated": None, "threshold": None, "unsupported_spans": [],
                  "error": True},
    }
    missing = langsmith_evaluator("lexical")(inputs={"question": "q"}, outputs={"output": "an answer"})
    assert missing["comment"] == ("no contexts: neither outputs nor inputs hold 'contexts' or 'documents' (keys: output / "
                                  "question): return {'answer': str, 'contexts': [str, ...]} (or 'output' and 'documents')")


def test_langsmith_evaluate_sends_one_feedback_per_example_with_the_metric_value_and_reason() -> None:
    fake = FakeLangSmith()
    with LoopbackServer(fake.respond) as server:
        client = langsmith.Client(api_url=server.url, api_key=API_KEY, auto_batch_tracing=False)
        results = langsmith.evaluate(rag_app, data="rag-eval", evaluators=[langsmith_evaluator("lexical")],
                                     client=client, experiment_prefix="groundtrace", max_concurrency=0)
        rows = list(results)

    assert [row["evaluation_results"]["results"][0].score for row in rows] == [1.0, 0.0]
    target_runs = {run["id"]: run for run in fake.runs.values() if run.get("reference_example_id")}
    by_example = {run["reference_example_id"]: run_id for run_id, run in target_runs.items()}
    assert sorted(by_example) == sorted(EXAMPLE_IDS)
    evaluator_runs = {run_id for run_id, run in fake.runs.items() if run.get("name") == "lexical"}  # traced under the metric
    sent = sorted(fake.feedback, key=lambda f: f["score"], reverse=True)
    for feedback in sent:
        for generated in ("id", "created_at", "modified_at", "start_time"):
            assert feedback.pop(generated)
        source = feedback.pop("feedback_source")
        assert source["type"] == "model" and source["metadata"]["__run"]["run_id"] in evaluator_runs
        assert feedback.pop("trace_id") == feedback["run_id"]  # the target's run is its trace's root
    assert len(evaluator_runs) == 2
    assert sent == [
        {"run_id": by_example[EXAMPLE_IDS[0]], "session_id": EXPERIMENT_ID, "key": "lexical", "score": 1.0,
         "value": "grounded",
         "comment": "grounding 1.00: 100% of the answer's keywords occur in the contexts, BLEU 1.00",
         "extra": {"higher_is_better": True, "hallucinated": False, "threshold": 0.4, "unsupported_spans": []},
         "extend_trace_retention": True},
        {"run_id": by_example[EXAMPLE_IDS[1]], "session_id": EXPERIMENT_ID, "key": "lexical", "score": 0.0,
         "value": "hallucinated",
         "comment": "grounding 0.00: 0% of the answer's keywords occur in the contexts, BLEU 0.00; 3 keyword(s) not "
                    "found in any context: gallop, savannas, zebras",
         "extra": {"higher_is_better": True, "hallucinated": True, "threshold": 0.4, "unsupported_spans": [
             {"start": 0, "end": 6, "text": "Zebras", "label": "unexpected word"},
             {"start": 7, "end": 13, "text": "gallop", "label": "unexpected word"},
             {"start": 29, "end": 37, "text": "savannas", "label": "unexpected word"}]},
         "extend_trace_retention": True},
    ]
