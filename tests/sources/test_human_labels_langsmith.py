"""Human labels read back from LangSmith, on the wire: a real LangChain chain traced into a loopback
LangSmith, people's feedback written with the real SDK (and one as the LangSmith UI stores it), and the
exact request the reader sends; `fit` and `bench --from langsmith:...` see exactly the 0/1 they mean."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langgraph")

import langsmith  # noqa: E402
from langchain_core.tracers import LangChainTracer  # noqa: E402
from platform_app import run_requests  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from groundtrace.cli import app  # noqa: E402
from groundtrace.io.labelled import labelled_from_source  # noqa: E402
from groundtrace.sources import open_source  # noqa: E402
from groundtrace.sources.human_labels import read_human_labels  # noqa: E402
from tests.sources.test_source_langsmith import API_KEY, PROJECT_ID, FakeLangSmith  # noqa: E402

runner = CliRunner()


class LabellingLangSmith(FakeLangSmith):
    """GET /feedback as LangSmith answers it: by run, and by key and source type only when asked."""

    def respond(self, request):
        if (request.method, request.path) == ("GET", "/feedback"):
            return 200, [f for f in self.feedback if f["run_id"] in request.query["run"]
                         and f["key"] in request.query.get("key", [f["key"]])
                         and f["feedback_source"]["type"] in request.query.get("source", [f["feedback_source"]["type"]])]
        return super().respond(request)


@pytest.fixture
def labelled(loopback):
    """Three RAG requests traced by the real tracer; under 'correctness': the first 'correct' from a person
    (an evaluator said 0), the second 'incorrect' from the LangSmith UI and 'thumbs' from the app, the third
    a person's True, corrected by the same person to 0.2 a minute later."""
    fake = LabellingLangSmith()
    server = loopback(fake.respond)
    client = langsmith.Client(api_url=server.url, api_key=API_KEY, auto_batch_tracing=False)
    tracer = LangChainTracer(project_name="rag-app", client=client)
    run_requests([tracer], lambda i: {})
    tracer.wait_for_futures()
    roots = [r["id"] for r in sorted(fake.runs.values(), key=lambda r: r["start_time"]) if r.get("parent_run_id") is None][:3]

    def feedback(run_id: str, **what) -> None:  # on the root run, in its trace and project, as an app writes it
        client.create_feedback(run_id, trace_id=run_id, session_id=PROJECT_ID, **what)

    feedback(roots[0], key="correctness", score=1, value="correct", comment="right city")
    feedback(roots[0], key="correctness", score=0, feedback_source_type="model", source_info={"name": "some-evaluator"})
    feedback(roots[1], key="thumbs", score=1)
    ui = {**fake.feedback[0], "id": "0f6a7a43-3c1f-4d5e-9a55-1d2b3c4d5e6f", "run_id": roots[1], "trace_id": roots[1],
          "score": None, "value": "incorrect", "comment": "wrong year",
          "feedback_source": {"type": "app", "metadata": None, "user_id": "7e0c1b2a-0000-4000-8000-000000000001"}}
    fake.feedback.append(ui)  # what LangSmith keeps of a label set in its UI (source type 'app')
    later = datetime.now(timezone.utc) + timedelta(minutes=1)
    feedback(roots[2], key="correctness", score=True)
    feedback(roots[2], key="correctness", score=0.2)
    fake.feedback[-1]["modified_at"] = later.isoformat()  # the correction, a minute later
    server.requests.clear()
    return {"fake": fake, "server": server, "roots": roots}


def test_the_request_and_the_labels_read_back(labelled) -> None:
    source = open_source("langsmith:rag-app", api_url=labelled["server"].url, api_key=API_KEY)
    records = list(source.records())
    labelled["server"].requests.clear()
    found = sorted((label.record_id, label.name, label.score, label.category, label.at is not None)
                   for label in read_human_labels(source, records))
    first, second, third = labelled["roots"]
    assert [r.id for r in records] == labelled["roots"]
    # as the SDK sent them (and the UI keeps its own): a person's feedback is 'api' or 'app', an evaluator's 'model'
    assert [(f["key"], f["feedback_source"]["type"], f["score"], f.get("value")) for f in labelled["fake"].feedback] == [
        ("correctness", "api", 1, "correct"), ("correctness", "model", 0, None), ("thumbs", "api", 1, None),
        ("correctness", "app", None, "incorrect"), ("correctness", "api", True, None), ("correctness", "api", 0.2, None)]
    (asked,) = labelled["server"].requests  # one request for every root run: all keys, all sources
    assert (asked.method, asked.path) == ("GET", "/feedback")
    assert asked.query == {"run": [first, second, third], "limit": ["100"], "offset": ["0"]}
    assert asked.headers["x-api-key"] == API_KEY
    assert found == sorted([(first, "correctness", 1, "correct", True), (second, "thumbs", 1, None, True),
                            (second, "correctness", None, "incorrect", True), (third, "correctness", True, None, True),
                            (third, "correctness", 0.2, None, True)])

    items, count = labelled_from_source("langsmith:rag-app", label_name="correctness",
                                        source_options={"api_url": labelled["server"].url, "api_key": API_KEY})
    assert [(i.raw["id"], i.label) for i in items] == [(first, 0), (second, 1), (third, 1)]
    assert count.line() == "labels from langsmith:rag-app ('correctness'): 3 of 3 records labelled (2 unsupported)"


def test_bench_and_fit_see_the_labels(labelled) -> None:
    common = ["--from", "langsmith:rag-app", "-S", f"api_url={labelled['server'].url}", "-S", f"api_key={API_KEY}",
              "--label-name", "correctness", "-m", "lexical"]
    bench = runner.invoke(app, ["bench", *common, "--json"])
    assert bench.exit_code == 0, bench.output
    assert {k: json.loads(bench.stdout)["lexical"][k] for k in ("n", "positives")} == {"n": 3, "positives": 2}
    fit = runner.invoke(app, ["fit", *common, "--label-map", "incorrect=supported"])
    assert fit.exit_code == 2 and "too few labels to fit: 3 records, 1 labelled 1 and 2 labelled 0" in " ".join(fit.output.split())
    unknown = runner.invoke(app, ["bench", *common[:6], "--label-name", "helpfulness", "-m", "lexical"])
    assert unknown.exit_code == 2
    # the evaluator's feedback is not a person's: only the human names are listed
    assert ("no human label named 'helpfulness' on the 3 records read from langsmith:rag-app; the human labels there "
            "are named: correctness (on 3), thumbs (on 1)") in " ".join(unknown.output.split())


def test_a_source_without_labels_says_what_to_do(tmp_path) -> None:
    spans = tmp_path / "spans.json"
    spans.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["fit", "--from", f"otel-json:{spans}", "--label-name", "correctness"])
    assert result.exit_code == 2
    assert "keeps no human labels: label its records with `groundtrace review` and pass --labels FILE" in " ".join(result.output.split())
