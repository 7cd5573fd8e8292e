"""groundtrace.evaluators.langsmith_evaluator inside `langsmith.evaluate`: the real SDK runs a dataset of
two examples through a target and the evaluator, against a loopback server that answers LangSmith's
dataset, example, experiment and run endpoints and keeps the feedback it is sent; the feedback payloads
are asserted whole (lexical values by hand: tests/hand_checked.py)."""

from __future__ import annotations

import pytest

langsmith = pytest.importorskip("langsmith")

from groundtrace.evaluators import langsmith_evaluator  # noqa: E402
from tests.hand_checked import CONTEXT, COPY, COPY_REASON, ZEBRAS, ZEBRAS_REASON, ZEBRAS_SPANS  # noqa: E402
from tests.langsmith_api import EXPERIMENT_ID, FakeLangSmith  # noqa: E402
from tests.loopback import LoopbackServer  # noqa: E402

API_KEY = "lsv2_pt_test_secret_0123456789abcdef"
EXAMPLE_IDS = ["0f1e2d3c-4b5a-4968-8776-655443322110", "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"]
EXAMPLES = [(EXAMPLE_IDS[0], {"question": "When does the library open?"}, {"reference": "At nine."}),
            (EXAMPLE_IDS[1], {"question": "What lives on the savanna?"}, {"reference": "Zebras."})]
ANSWERS = {"library": COPY, "savanna": ZEBRAS}


def rag_app(inputs: dict) -> dict:
    """The application under evaluation: a retriever (one passage) and a generator (a replay)."""
    topic = "library" if "library" in inputs["question"] else "savanna"
    return {"answer": ANSWERS[topic], "contexts": [CONTEXT]}


def test_the_evaluator_called_as_langsmith_calls_it_returns_key_score_and_comment() -> None:
    evaluate = langsmith_evaluator("lexical")
    result = evaluate(inputs={"question": "What lives on the savanna?"}, outputs=rag_app({"question": "savanna"}),
                      reference_outputs={"reference": "Zebras."})
    assert result == {
        "key": "lexical", "score": 0.0, "value": "hallucinated",
        "comment": ZEBRAS_REASON,
        "extra": {"higher_is_better": True, "hallucinated": True, "threshold": 0.4, "unsupported_spans": ZEBRAS_SPANS},
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
    fake = FakeLangSmith(EXAMPLES)
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
         "comment": COPY_REASON,
         "extra": {"higher_is_better": True, "hallucinated": False, "threshold": 0.4, "unsupported_spans": []},
         "extend_trace_retention": True},
        {"run_id": by_example[EXAMPLE_IDS[1]], "session_id": EXPERIMENT_ID, "key": "lexical", "score": 0.0,
         "value": "hallucinated",
         "comment": ZEBRAS_REASON,
         "extra": {"higher_is_better": True, "hallucinated": True, "threshold": 0.4, "unsupported_spans": ZEBRAS_SPANS},
         "extend_trace_retention": True},
    ]
