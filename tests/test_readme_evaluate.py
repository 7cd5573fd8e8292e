"""Every example of the README section "Evaluate offline, in the loop you already have" runs here, as it is
written there: each code block carries a name (<!-- example: NAME -->) and this file has one test per
name. `rag_app`, `query_engine` and the data files the examples name are what a reader's project would
have; here they are a replay application over one passage, a real LlamaIndex query engine over it, and
small files in each layout. The GitHub Actions job is read as YAML and its groundtrace steps are run in
order (its other steps install Python and the application)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Evaluate offline, in the loop you already have"
BIN = Path(sys.executable).parent  # the groundtrace command of this environment

QUESTION = "When does the library open?"
PASSAGE = "The library opens at 9:00 and closes at 18:00 on weekdays."
ANSWER = "The library opens at 9:00 on weekdays."


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))]


def blocks() -> dict[str, tuple[str, str]]:
    """name -> (language, code) of each named block of the section."""
    found = re.findall(r"<!-- (example|output): ([\w-]+) -->\n```(\w*)\n(.*?)```", section(), re.S)
    return {f"{kind}:{name}": (language, code) for kind, name, language, code in found}


def block(name: str) -> str:
    return blocks()[name][1]


def rag_app(question: str) -> tuple[str, list[str]]:
    """The reader's application: the answer and the passages it was written from (a replay)."""
    return ANSWER, [PASSAGE]


def ragas_rows() -> list[dict[str, Any]]:
    return [{"id": "q1", "user_input": QUESTION, "retrieved_contexts": [PASSAGE], "response": ANSWER,
             "reference": "At 9:00.", "label": 0},
            {"id": "q2", "user_input": "When does it close?", "retrieved_contexts": [PASSAGE],
             "response": "It closes at 21:00 on weekdays.", "reference": "At 18:00.", "label": 1}]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the files the examples name."""
    rows = ragas_rows()
    with open(tmp_path / "ragas_eval.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "retrieved_contexts": json.dumps(row["retrieved_contexts"])} for row in rows)
    (tmp_path / "deepeval_cases.jsonl").write_text("".join(
        json.dumps({"input": r["user_input"], "actual_output": r["response"], "retrieval_context": r["retrieved_contexts"],
                    "expected_output": r["reference"]}) + "\n" for r in rows), encoding="utf-8")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "labelled.parquet")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def run_python(name: str, **namespace: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": f"readme_{name}", **namespace}
    exec(compile(block(f"example:{name}"), f"README.md:{name}", "exec"), scope)  # noqa: S102 - our own README
    return scope


def test_every_block_of_the_section_is_named_and_each_name_has_a_test() -> None:
    fences = section().count("```") // 2
    assert len(blocks()) == fences  # no example without a name
    assert set(blocks()) == {"example:files", "example:pandas", "example:llamaindex", "example:langsmith",
                             "example:mlflow", "example:pytest", "output:pytest", "example:ci"}


def test_files(project: Path) -> None:
    result = run_shell(block("example:files"), project)
    assert result.returncode == 0, result.stdout + result.stderr
    scored = [json.loads(line) for line in (project / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(row["id"], row["record"]["question"], row["record"]["reference"]) for row in scored] == \
        [("q1", QUESTION, "At 9:00."), ("q2", "When does it close?", "At 18:00.")]
    assert [score["metric"] for score in scored[0]["scores"]] == ["lexical", "facts"]
    assert "bench: labelled.parquet" in result.stdout
    assert "wrote scores.html: 2 records, 2 with gold labels" in " ".join(result.stderr.split())


def test_pandas(project: Path) -> None:
    scope = run_python("pandas")
    scored, flagged = scope["scored"], scope["flagged"]
    assert list(scored.columns[-8:]) == ["lexical", "lexical_flagged", "lexical_reason", "lexical_spans",
                                         "facts", "facts_flagged", "facts_reason", "facts_spans"]
    assert list(flagged.columns) == ["response", "facts", "facts_reason", "facts_spans"]
    assert scored["facts_flagged"].tolist() == [score >= 0.3 for score in scored["facts"]]  # the threshold given


def test_llamaindex() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    from groundtrace import get_metric

    class Replay(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="replay")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text=ANSWER)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            raise NotImplementedError

    index = VectorStoreIndex.from_documents([Document(text=PASSAGE)], embed_model=MockEmbedding(embed_dim=8))
    scope = run_python("llamaindex", query_engine=index.as_query_engine(llm=Replay()))
    [grounding], [facts] = scope["results"]["grounding"], scope["results"]["facts"]
    assert (grounding.query, grounding.response, grounding.contexts) == (QUESTION, ANSWER, [PASSAGE])
    threshold = get_metric("grounding").threshold  # higher = more hallucinated: passing below it
    assert 0.0 <= grounding.score <= 1.0 and grounding.passing == (grounding.score < threshold)
    assert facts.passing is (facts.score < 0.3) and facts.feedback.startswith("hallucination ")


def test_langsmith(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langsmith")
    import langsmith.run_trees

    from tests.langsmith_api import FakeLangSmith
    from tests.loopback import LoopbackServer

    fake = FakeLangSmith([("0f1e2d3c-4b5a-4968-8776-655443322110", {"question": QUESTION}, {"answer": "At 9:00."})])
    with LoopbackServer(fake.respond) as server:
        monkeypatch.setenv("LANGSMITH_ENDPOINT", server.url)
        monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2_pt_test_secret_0123456789abcdef")
        monkeypatch.setattr(langsmith.run_trees, "_CLIENT", None)  # the example's default client, from this env
        run_python("langsmith", rag_app=rag_app)
        langsmith.run_trees.get_cached_client().flush()
    assert sorted(f["key"] for f in fake.feedback) == ["facts", "grounding"]
    assert all(0.0 <= f["score"] <= 1.0 and f["comment"] for f in fake.feedback)
    facts = next(f for f in fake.feedback if f["key"] == "facts")
    assert (facts["value"], facts["extra"]["hallucinated"]) == ("grounded", False)


def test_mlflow(tmp_path: Path) -> None:
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("mlflow.genai")
    from tests.mlflow_store import sqlite_tracking

    with sqlite_tracking(tmp_path, "readme"):
        result = run_python("mlflow")["result"]
        [trace] = mlflow.search_traces(run_id=result.run_id, return_type="list")
        found = {a.name: a for a in mlflow.get_trace(trace.info.trace_id).info.assessments}
    assert 0.0 <= found["grounding"].value <= 1.0 and found["grounding"].rationale
    # the answer's one fact is the time 9:00 (it was read as two numbers, 9 and 00)
    assert found["facts"].rationale == ("hallucination 0.08: similarity to the contexts 0.84; all 1 facts of the answer "
                                        "are in the contexts")


def test_pytest() -> None:
    scope = run_python("pytest", rag_app=rag_app)
    test: Callable[[], None] = scope["test_the_library_answer_is_grounded"]
    test()  # passes: the answer's facts (9:00, weekdays) are in the passage


def test_pytest_output_is_what_assert_grounded_says() -> None:
    from groundtrace.testing import assert_grounded

    with pytest.raises(AssertionError) as failed:
        assert_grounded("Общежитие стоит 2 500 рублей в месяц.", ["Плата за проживание составляет 1 879 рублей в месяц."],
                        question="Сколько стоит общежитие?", metric="facts")
    shown = [line.removeprefix("E").strip() for line in block("output:pytest").splitlines()]
    assert shown == [f"AssertionError: {failed.value}".splitlines()[0], *str(failed.value).splitlines()[1:]]


def test_ci(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    job = yaml.safe_load(block("example:ci"))
    steps = job["jobs"]["grounding"]["steps"]
    assert job[True] == ["pull_request"]  # YAML 1.1 reads the key `on` as true
    commands = [step["run"] for step in steps if step.get("run", "").startswith("groundtrace ")]
    assert len(commands) == 2 and steps[-1]["with"]["path"] == "grounding-report.html"
    assert all(step.get("if") == "always()" for step in steps if step.get("run", "").startswith("groundtrace report"))

    def job_run(answers: list[dict[str, Any]]) -> list[subprocess.CompletedProcess[str]]:
        # what `python eval/answer.py eval/questions.jsonl > answers.jsonl` would write
        (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
        return [run_shell(command, tmp_path) for command in commands]  # `if: always()`: the report runs anyway

    grounded = [{"id": str(i), "question": QUESTION, "contexts": [PASSAGE], "answer": PASSAGE} for i in range(2)]
    score, report = job_run(grounded)
    assert (score.returncode, report.returncode) == (0, 0), score.stdout + score.stderr
    assert [line for line in score.stderr.splitlines() if line.startswith("gate")] == [
        "gate passed: grounding flagged 0 of 2 records (0.0%: 0 flagged, 0 could not be scored), at most the allowed 10.0%",
        "gate passed: facts flagged 0 of 2 records (0.0%: 0 flagged, 0 could not be scored), at most the allowed 10.0%"]
    assert (tmp_path / "grounding-report.html").exists()

    score, report = job_run([*grounded, {"id": "2", "question": QUESTION, "contexts": [PASSAGE], "answer": ""}])
    assert (score.returncode, report.returncode) == (1, 0)
    assert [line for line in score.stderr.splitlines() if line.startswith("gate")] == [
        "gate failed: grounding flagged 1 of 3 records (33.3%: 0 flagged, 1 could not be scored), more than the allowed 10.0%",
        "gate failed: facts flagged 1 of 3 records (33.3%: 0 flagged, 1 could not be scored), more than the allowed 10.0%"]
