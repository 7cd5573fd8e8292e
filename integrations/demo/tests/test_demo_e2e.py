"""`groundtrace demo` end to end: a real LangChain LCEL chain and a real LlamaIndex query engine answer
the bundled questions through the replay model, groundtrace attached to each by one line; the scores
land in scores.jsonl, on OpenTelemetry spans and, when mlflow is installed, on MLflow traces.
Also: the order in which the demo picks its LLM, and how groundtrace's command line finds it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app, plugin_commands
from groundtrace_demo import data
from groundtrace_demo.llms import REPLAY_LABEL, ReplayResponder, choose_llm
from groundtrace.io import read_scored
from groundtrace.score import ScoredRecord
from tests.loopback import LoopbackServer

for module in ("langchain_core", "groundtrace_langchain", "llama_index.core", "groundtrace_llamaindex", "opentelemetry.sdk"):
    pytest.importorskip(module)

METRICS = {"grounding", "facts", "lexical"}
# the demo must take the replay path, whatever the machine running the tests has configured
LLM_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GROUNDTRACE_DEMO_LLM_URL", "GROUNDTRACE_DEMO_MODEL",
                 "MLFLOW_TRACKING_URI")
HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


@dataclass
class DemoRun:
    out: Path
    output: str
    rows: dict[str, ScoredRecord]  # by question id


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    out = tmp_path_factory.mktemp("demo")
    env = {key: value for key, value in os.environ.items() if key not in LLM_VARIABLES}
    done = subprocess.run([sys.executable, "-m", "groundtrace.cli", "demo", "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    by_text = {q.question: q.id for q in data.questions()}
    rows = {by_text[row.record.question]: row for row in read_scored(out / "scores.jsonl")}
    return DemoRun(out, output, rows)


def test_the_output_says_the_answers_are_replayed(demo: DemoRun) -> None:
    assert f"LLM: {REPLAY_LABEL}" in demo.output
    assert f"{REPLAY_LABEL}: grounding flagged " in demo.output  # the one-line summary
    assert "planted hallucinations" in demo.output


def test_every_question_has_one_line_with_offline_scores(demo: DemoRun) -> None:
    lines = (demo.out / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(data.questions()) == len(demo.rows)
    passages = {p.id: p.text for p in data.corpus()}
    for question in data.questions():
        row = demo.rows[question.id]
        assert row.record.answer == question.answer  # the replay model's recorded answer
        assert passages[question.sources[0]] in row.record.contexts  # what the retriever found
        assert {s.metric for s in row.scores} == METRICS
        assert all(s.ok and 0.0 <= s.value <= 1.0 for s in row.scores), row.scores
        if question.lang == "en":  # answered by the LangChain chain, captured by its callback
            assert row.record.metadata["source"] == "langchain"
        else:  # answered by the LlamaIndex query engine, captured by instrument()
            assert row.record.id.startswith("RetrieverQueryEngine.query-")


def test_planted_hallucinations_are_spanned_by_grounding_or_facts(demo: DemoRun) -> None:
    # Changed numbers and baseless sentences; a dropped condition keeps the context's words, and the
    # offline metrics miss it as often as not (grounding's model card: 5 of 24 caught).
    planted = [q for q in data.questions() if q.planted and q.planted["kind"] != "dropped condition"]
    assert {q.lang for q in planted} == {"en", "ru"} and len(planted) == 4
    for question in planted:
        row = demo.rows[question.id]
        start = row.record.answer.index(question.planted["text"])
        end = start + len(question.planted["text"])
        spans = [span for score in row.scores if score.metric in ("grounding", "facts") for span in score.spans]
        assert any(s.start < end and start < s.end for s in spans), (question.id, spans)


def test_the_scores_are_on_opentelemetry_spans_under_each_request(demo: DemoRun) -> None:
    spans = [json.loads(line) for line in (demo.out / "otel-spans.jsonl").read_text(encoding="utf-8").splitlines()]
    evaluations = {}
    for span in spans:
        attributes = span["attributes"]
        if "gen_ai.evaluation.name" in attributes:
            key = (span["context"]["trace_id"], span["parent_id"], attributes["gen_ai.evaluation.name"])
            evaluations[key] = attributes
    for row in demo.rows.values():
        for score in row.scores:
            attributes = evaluations[(f"0x{row.record.trace_id}", f"0x{row.record.span_id}", score.metric)]
            assert attributes["gen_ai.evaluation.score.value"] == pytest.approx(score.value)
            assert attributes["groundtrace.metric"] == score.metric
    assert len(evaluations) == len(demo.rows) * len(METRICS)
    assert f"OpenTelemetry: {len(evaluations)} of {len(spans)} spans carry groundtrace scores" in demo.output


@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed: the demo skips MLflow")
def test_the_scores_are_feedback_on_local_mlflow_traces(demo: DemoRun) -> None:
    assert all(row.record.trace_links.get("mlflow", "").startswith("tr-") for row in demo.rows.values())
    assert f"MLflow: {len(demo.rows) * len(METRICS)} groundtrace feedback assessments" in demo.output
    assert (demo.out / "mlflow" / "mlflow.db").is_file()


def test_the_report_is_written_beside_the_scores(demo: DemoRun) -> None:
    assert (demo.out / "report.html").is_file()
    assert f"report: {demo.out / 'report.html'}" in demo.output


# ---------------------------------------------------------------------------------- the LLM choice
def _no_partner_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on this machine: langchain-openai and llama-index-llms-openai-like are not installed."""
    monkeypatch.setattr("groundtrace_demo.llms.installed", lambda module: False)


def test_with_nothing_configured_the_replay_model_answers() -> None:
    choice = choose_llm(data.questions(), environ={})
    assert (choice.kind, choice.label, choice.notes) == ("replay", REPLAY_LABEL, [])


def test_an_openai_key_without_the_partner_packages_is_passed_over_with_a_note(monkeypatch) -> None:
    _no_partner_packages(monkeypatch)
    choice = choose_llm(data.questions(), environ={"OPENAI_API_KEY": "sk-test"})
    assert choice.replay
    assert "pip install langchain-openai llama-index-llms-openai-like" in choice.notes[0]


def test_an_openai_endpoint_takes_its_url_and_key_from_the_environment_choose_llm_was_given(monkeypatch) -> None:
    monkeypatch.setattr("groundtrace_demo.llms.installed", lambda module: True)  # as where the partner packages are
    choice = choose_llm(data.questions(), environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-test"})
    assert (choice.kind, choice.model, choice.base_url, choice.api_key) == ("openai", "gpt-4o-mini", "http://127.0.0.1:9/v1", "sk-test")


def test_a_local_server_that_does_not_answer_is_passed_over_with_a_note() -> None:
    with LoopbackServer(lambda request: (200, {})) as server:
        url = server.url
    choice = choose_llm(data.questions(), environ={"GROUNDTRACE_DEMO_LLM_URL": url})  # stopped: refused
    assert choice.replay
    assert f"no server answers at {url}/v1" in choice.notes[0]


def test_a_local_server_answers_through_both_frameworks(monkeypatch) -> None:
    from groundtrace_demo import langchain_app, llamaindex_app

    def respond(request):
        if request.path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "smollm2-135m"}]}
        return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": " From the server. "}}]}

    _no_partner_packages(monkeypatch)
    with LoopbackServer(respond) as server:
        choice = choose_llm(data.questions(), environ={"GROUNDTRACE_DEMO_LLM_URL": server.url,
                                                       "OPENAI_API_KEY": "sk-test"})
        assert (choice.kind, choice.model) == ("llama.cpp", "smollm2-135m")
        assert choice.label == f"local server {server.url}/v1, model smollm2-135m"
        assert langchain_app.chat_model(choice).invoke("Hello?").content == "From the server."
        assert llamaindex_app.llm(choice).complete("Привет?").text == "From the server."
    chats = [r.json for r in server.requests if r.path == "/v1/chat/completions"]
    assert [c["messages"] for c in chats] == [[{"role": "user", "content": "Hello?"}],
                                              [{"role": "user", "content": "Привет?"}]]
    assert {c["model"] for c in chats} == {"smollm2-135m"}


def test_the_replay_finds_the_question_inside_a_prompt() -> None:
    replay = ReplayResponder(data.questions())
    question = data.questions_in("ru")[0]
    prompt = f"Контекст…\nВопрос: {question.question}\nОтвет: "
    assert replay.reply([{"role": "user", "content": prompt}]) == question.answer
    with pytest.raises(LookupError, match="no recorded answer"):
        replay.reply([{"role": "user", "content": "What is the meaning of life?"}])


# ------------------------------------------------------------------------------ the command line
def test_groundtrace_finds_the_command_through_its_entry_point() -> None:
    assert plugin_commands()["demo"].value == "groundtrace_demo.cli:demo_command"
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "demo" in result.output


def test_examples_only_scores_the_bundled_examples(tmp_path) -> None:
    result = CliRunner().invoke(app, ["demo", "--examples", "-o", str(tmp_path), "-m", "lexical"])
    assert result.exit_code == 0, result.output
    assert "pip install -e ./integrations/demo" not in result.output  # it is installed
    ids = [row.id for row in read_scored(tmp_path / "scores.jsonl")]
    assert {"ru-1", "en-1", "zh-1"} <= set(ids)
