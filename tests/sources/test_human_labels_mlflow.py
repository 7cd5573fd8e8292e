"""Human labels read back from a real MLflow store: assessments logged with MLflow's own API (a person's, a
judge's, one overriding another), read by `fit` and `bench --from mlflow:...` as exactly the 0/1 they mean."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

mlflow = pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from groundtrace.cli import app  # noqa: E402
from groundtrace.io.label_values import LabelMap  # noqa: E402
from groundtrace.io.labelled import labelled_from_source  # noqa: E402
from groundtrace.sources import open_source  # noqa: E402
from groundtrace.sources.human_labels import read_human_labels  # noqa: E402
from tests.mlflow_store import sqlite_tracking  # noqa: E402

runner = CliRunner()
QUESTIONS = [f"Where is museum {i}?" for i in range(6)]


def request(question: str, document: str, answer: str) -> str:
    """One RAG request traced by MLflow's own spans: a root chain with a retriever under it."""
    with mlflow.start_span("request", span_type="CHAIN") as root:
        root.set_inputs({"question": question})
        with mlflow.start_span("retrieve", span_type="RETRIEVER") as retriever:
            retriever.set_inputs({"query": question})
            retriever.set_outputs([{"page_content": document, "metadata": {}}])
        root.set_outputs(answer)
    time.sleep(0.01)  # distinct start times: the source reads the oldest first
    return mlflow.get_last_active_trace_id()


def human(who: str = "ana@example.com"):
    return mlflow.entities.AssessmentSource(source_type="HUMAN", source_id=who)


def judge():
    return mlflow.entities.AssessmentSource(source_type="LLM_JUDGE", source_id="gpt-judge")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[dict]:
    """Six requests and what people (and a judge) said of them under 'correctness':
    0 True, 1 False, 2 'incorrect' (a judge said 'correct'), 3 a judge's 0.2 a person overrode with 0.9,
    4 a person's 0.8 then another's 0.1, 5 only a judge's label and a person's 'tone'."""
    with sqlite_tracking(tmp_path_factory.mktemp("mlflow-labels"), "labels") as uri:
        traces = [request(q, f"Museum {i} is on Main Street.", f"It is on Main Street, number {i}.")
                  for i, q in enumerate(QUESTIONS)]
        mlflow.flush_trace_async_logging()
        log = mlflow.log_feedback
        log(trace_id=traces[0], name="correctness", value=True, source=human())
        log(trace_id=traces[1], name="correctness", value=False, source=human(), rationale="wrong street")
        log(trace_id=traces[2], name="correctness", value="incorrect", source=human())
        log(trace_id=traces[2], name="correctness", value="correct", source=judge())
        judged = log(trace_id=traces[3], name="correctness", value=0.2, source=judge())
        mlflow.override_feedback(trace_id=traces[3], assessment_id=judged.assessment_id, value=0.9, source=human("bo"))
        log(trace_id=traces[4], name="correctness", value=0.8, source=human("ana"))
        log(trace_id=traces[4], name="correctness", value=0.1, source=human("bo"))
        log(trace_id=traces[5], name="correctness", value="correct", source=judge())
        log(trace_id=traces[5], name="tone", value="rude", source=human())
        experiment = mlflow.get_experiment_by_name("labels").experiment_id
        yield {"uri": uri, "spec": f"mlflow:{experiment}", "traces": traces}


def test_the_labels_read_back_are_what_people_wrote(store) -> None:
    source = open_source(store["spec"], tracking_uri=store["uri"])
    records = list(source.records())
    assert [r.id for r in records] == store["traces"]  # oldest first
    found = {(label.record_id, label.name): [] for label in read_human_labels(source, records)}
    for label in read_human_labels(source, records):
        found[(label.record_id, label.name)].append((label.score, label.category))
    t = store["traces"]
    assert found == {(t[0], "correctness"): [(True, None)], (t[1], "correctness"): [(False, None)],
                     (t[2], "correctness"): [(None, "incorrect")], (t[3], "correctness"): [(0.9, None)],
                     (t[4], "correctness"): [(0.8, None), (0.1, None)], (t[5], "tone"): [(None, "rude")]}

    items, count = labelled_from_source(store["spec"], label_name="correctness", source_options={"tracking_uri": store["uri"]})
    assert [(i.raw["id"], i.label) for i in items] == [(t[0], 0), (t[1], 1), (t[2], 1), (t[3], 0), (t[4], 1)]
    assert count.line() == (f"labels from {store['spec']} ('correctness'): 5 of 6 records labelled (3 unsupported); "
                            "1 without a label left out")
    assert items[0].raw["contexts"] == ["Museum 0 is on Main Street."] and items[0].raw["label"] == 0

    inverted, _ = labelled_from_source(store["spec"], label_name="correctness", label_map=LabelMap.parse(
        "true=unsupported,false=supported,incorrect=supported", above=0.5), source_options={"tracking_uri": store["uri"]})
    assert [i.label for i in inverted] == [1, 0, 0, 1, 0]


def test_bench_and_fit_see_the_labels(store) -> None:
    common = ["--from", store["spec"], "-S", f"tracking_uri={store['uri']}", "--label-name", "correctness", "-m", "lexical"]
    bench = runner.invoke(app, ["bench", *common, "--json"])
    assert bench.exit_code == 0, bench.output
    assert {k: json.loads(bench.stdout)["lexical"][k] for k in ("n", "positives", "errors")} == {"n": 5, "positives": 3, "errors": 0}
    assert "5 of 6 records labelled (3 unsupported); 1 without a label left out" in " ".join(bench.stderr.split())
    fit = runner.invoke(app, ["fit", *common])
    # five labels are too few to fit on: the refusal counts exactly what was read
    assert fit.exit_code == 2 and "too few labels to fit: 5 records, 3 labelled 1 and 2 labelled 0" in " ".join(fit.output.split())


def test_a_label_name_nobody_used_names_the_ones_there(store) -> None:
    result = runner.invoke(app, ["bench", "--from", store["spec"], "-S", f"tracking_uri={store['uri']}",
                                 "--label-name", "helpfulness", "-m", "lexical"])
    assert result.exit_code == 2
    assert (f"no human label named 'helpfulness' on the 6 records read from {store['spec']}; the human labels there are "
            "named: correctness (on 5), tone (on 1)") in " ".join(result.output.split())
    unmapped = runner.invoke(app, ["bench", "--from", store["spec"], "-S", f"tracking_uri={store['uri']}",
                                   "--label-name", "tone", "-m", "lexical"])
    assert unmapped.exit_code == 2
    assert "labels named 'tone': 'rude' is not a value these labels map: name it with --label-map \"rude=unsupported\"" in " ".join(unmapped.output.split())
