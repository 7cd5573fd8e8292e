"""Human labels read back from Langfuse, on the wire: a real LangChain chain traced by Langfuse's own
CallbackHandler into a loopback Langfuse, annotation scores as Langfuse's v3 scores API returns them
(numeric, categorical, boolean; an evaluator's beside them), and the exact requests the reader sends;
`fit` and `bench --from langfuse:...` see exactly the 0/1 they mean."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langfuse")
pytest.importorskip("langgraph")
pytest.importorskip("opentelemetry.proto")

from typer.testing import CliRunner  # noqa: E402

from groundtrace.cli import app  # noqa: E402
from groundtrace.io.labelled import labelled_from_source  # noqa: E402
from groundtrace.sources import open_source  # noqa: E402
from groundtrace.sources.human_labels import read_human_labels  # noqa: E402
from tests.sources.test_source_langfuse import PROJECT, PUBLIC, SECRET, langfuse_app  # noqa: E402, F401 - a fixture

runner = CliRunner()


def annotation(trace_id: str, name: str, data_type: str, value, at: str, **more) -> dict:
    """A score as Langfuse's v3 API returns one a person set in the UI (source ANNOTATION)."""
    return {"id": f"score-{trace_id[:6]}-{name}-{at[-3:]}", "projectId": PROJECT["id"], "traceId": trace_id,
            "name": name, "dataType": data_type, "value": value, "source": more.pop("source", "ANNOTATION"),
            "timestamp": at, "createdAt": at, "updatedAt": at, "environment": "default",
            "authorUserId": "user-ana", **more}


@pytest.fixture
def labelled(langfuse_app):  # noqa: F811 - the imported fixture
    """Under 'correctness': the first trace 1.0 (an evaluator's 0.0 beside it), the second 'incorrect'
    (and 'helpful' true), the third false, then true from another reviewer a minute later."""
    first, second, third = (root["traceId"] for root in langfuse_app["roots"][:3])
    scores = [
        annotation(first, "correctness", "NUMERIC", 1.0, "2026-03-02T10:00:00.000Z", queueId="queue-1"),
        annotation(first, "correctness", "NUMERIC", 0.0, "2026-03-02T10:00:01.000Z", source="EVAL"),
        annotation(second, "correctness", "CATEGORICAL", "incorrect", "2026-03-02T10:01:00.000Z", configId="cfg-1"),
        annotation(second, "helpful", "BOOLEAN", True, "2026-03-02T10:01:30.000Z"),
        annotation(third, "correctness", "BOOLEAN", False, "2026-03-02T10:02:00.000Z"),
        annotation(third, "correctness", "BOOLEAN", True, "2026-03-02T10:03:00.000Z", authorUserId="user-bo"),
    ]
    langfuse_app["fake"].scores += scores
    try:
        yield {**langfuse_app, "traces": [first, second, third]}
    finally:
        langfuse_app["fake"].scores.clear()


def test_the_requests_and_the_labels_read_back(labelled) -> None:
    source = open_source("langfuse:rag-app", public_key=PUBLIC, secret_key=SECRET, host=labelled["server"].url)
    records = list(source.records())
    labelled["server"].requests.clear()
    found = sorted((label.record_id, label.name, label.score, label.category, label.at.isoformat())
                   for label in read_human_labels(source, records))
    first, second, third = labelled["traces"]
    assert [r.id for r in records] == labelled["traces"]
    # one request per trace, annotations only, with the SDK's basic auth
    asked = labelled["server"].requests
    assert [(r.method, r.path, r.query) for r in asked] == [
        ("GET", "/api/public/v3/scores", {"traceId": [trace], "source": ["ANNOTATION"], "limit": ["100"]})
        for trace in labelled["traces"]]
    assert all(r.headers["authorization"].startswith("Basic ") for r in asked)
    assert found == sorted([
        (first, "correctness", 1.0, None, "2026-03-02T10:00:00+00:00"),
        (second, "correctness", None, "incorrect", "2026-03-02T10:01:00+00:00"),
        (second, "helpful", True, None, "2026-03-02T10:01:30+00:00"),
        (third, "correctness", False, None, "2026-03-02T10:02:00+00:00"),
        (third, "correctness", True, None, "2026-03-02T10:03:00+00:00")])

    items, count = labelled_from_source("langfuse:rag-app", label_name="correctness", source_options={
        "public_key": PUBLIC, "secret_key": SECRET, "host": labelled["server"].url})
    assert [(i.raw["id"], i.label) for i in items] == [(first, 0), (second, 1), (third, 0)]
    assert count.line() == "labels from langfuse:rag-app ('correctness'): 3 of 3 records labelled (1 unsupported)"


def test_bench_and_fit_see_the_labels(labelled, monkeypatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    monkeypatch.setenv("LANGFUSE_BASE_URL", labelled["server"].url)
    common = ["--from", "langfuse", "--label-name", "correctness", "-m", "lexical"]
    bench = runner.invoke(app, ["bench", *common, "--json"])
    assert bench.exit_code == 0, bench.output
    assert {k: json.loads(bench.stdout)["lexical"][k] for k in ("n", "positives")} == {"n": 3, "positives": 1}
    fit = runner.invoke(app, ["fit", *common, "--label-map", "true=unsupported,false=supported"])
    assert fit.exit_code == 2 and "too few labels to fit: 3 records, 2 labelled 1 and 1 labelled 0" in " ".join(fit.output.split())
    unknown = runner.invoke(app, ["fit", *common[:2], "--label-name", "faithfulness"])
    assert unknown.exit_code == 2
    assert ("no human label named 'faithfulness' on the 3 records read from langfuse; the human labels there are "
            "named: correctness (on 3), helpful (on 1)") in " ".join(unknown.output.split())
