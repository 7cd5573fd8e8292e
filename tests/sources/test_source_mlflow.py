"""MLflow source: a real LangChain RAG chain traced by MLflow's own LangChain autologging into a real
sqlite store; the source reads the traces back, the MLflow sink writes assessments onto them."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableLambda  # noqa: E402
from platform_app import ANSWERS, QUESTIONS, retrieved  # noqa: E402 - puts lc_app on the path

from lc_app import CORPUS, rag_chain, vector_retriever  # noqa: E402, I001

from groundtrace.errors import install_hint  # noqa: E402
from groundtrace._extras import MissingExtraError  # noqa: E402
from groundtrace.score import Score  # noqa: E402
from groundtrace.sinks.mlflow import MLflowSink  # noqa: E402
from groundtrace.sources import SCORED_KEY, SOURCE_KEY, SourceError, SourceFilter, open_source  # noqa: E402
from groundtrace.sources.mlflow import MLflowSource, filter_string  # noqa: E402



@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[dict]:
    """One sqlite store for the module (creating MLflow's tables takes seconds), holding the
    traces of real chain runs made under mlflow.langchain.autolog()."""
    previous = mlflow.get_tracking_uri()
    folder = tmp_path_factory.mktemp("mlflow-source")
    uri = f"sqlite:///{folder}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.create_experiment("rag-app", (folder / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment_id)
    made: dict = {"uri": uri, "experiment_id": experiment_id, "runs": []}
    # what the app's retriever returns for each question, looked up before tracing starts
    documents = [retrieved(q) for q in QUESTIONS]
    mlflow.langchain.autolog()
    try:
        for i, (question, answer) in enumerate(zip(QUESTIONS, ANSWERS, strict=True)):
            retriever = vector_retriever(k=2)
            started = datetime.now(timezone.utc)
            chain = rag_chain(answer, retriever=retriever)
            if i < 2:
                with mlflow.start_span("request") as span:  # an app's own root span, tagged
                    # MLflow files a trace under a session by its mlflow.trace.session metadata
                    session = {"mlflow.trace.session": "chat-a"} if i == 0 else {}
                    mlflow.update_current_trace(tags={"env": "staging" if i == 0 else "prod"},
                                                metadata={"customer": "acme" if i == 0 else "globex", **session})
                    output = chain.invoke(question)
                    span.set_inputs(question)
                    span.set_outputs(output)
            else:  # the chain itself is the root: autologging's RunnableSequence span
                # the third names its conversation only in the run's own metadata
                output = chain.invoke(question, config={"metadata": {"thread_id": "thread-c"}} if i == 2 else None)
            made["runs"].append({"question": question, "documents": documents[i], "answer": output,
                                 "trace": mlflow.get_last_active_trace_id(), "started": started})
            time.sleep(0.01)  # distinct start times
        # not RAG: a chain without a retriever, and a retrieval whose request has no output
        RunnableLambda(lambda q: f"echo {q}", name="echo").invoke("hello")
        with mlflow.start_span("retrieve-only") as span:
            span.set_inputs("What is the capital of France?")
            vector_retriever().invoke("What is the capital of France?")
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.langchain.autolog(disable=True)
    yield made
    mlflow.set_tracking_uri(previous)


def read(spec: str, store: dict, filters: SourceFilter | None = None, **options) -> tuple[list, MLflowSource]:
    source = open_source(spec, tracking_uri=store["uri"], **options)
    return list(source.records(filters)), source


def test_the_source_reconstructs_what_the_app_used(store) -> None:
    records, source = read(f"mlflow:{store['experiment_id']}", store)

    assert [(r.question, r.contexts, r.answer) for r in records] == [
        (run["question"], run["documents"], run["answer"]) for run in store["runs"]]
    assert records[0].contexts == [CORPUS[0].page_content, CORPUS[3].page_content]  # what k=2 retrieved
    for record, run in zip(records, store["runs"], strict=True):
        assert record.id == run["trace"] and record.trace_links == {"mlflow": run["trace"]}
        assert record.trace_id == run["trace"].removeprefix("tr-")  # MLflow's ids keep the OTel trace id
        assert len(record.span_id) == 16
        assert record.metadata[SOURCE_KEY] == f"mlflow:{store['experiment_id']}"
        assert SCORED_KEY not in record.metadata
    assert [r.metadata["root_span"] for r in records] == ["request", "request", "RunnableSequence"]
    assert [r.session_id for r in records] == ["chat-a", None, "thread-c"]
    assert source.stats.as_dict() == {"traces": 5, "records": 3, "skipped": {"no retrieval": 1, "no answer": 1}}
    assert source.sink == "mlflow"


def test_the_experiment_is_found_by_name_too_and_pages_stream_in_order(store) -> None:
    records, source = read("mlflow:rag-app", store, page_size=1)  # five search requests
    assert [r.question for r in records] == QUESTIONS
    assert source.stats.traces == 5


def test_since_until_limit_and_tags_are_honoured(store) -> None:
    runs = store["runs"]
    window = SourceFilter(since=runs[1]["started"], until=runs[2]["started"])
    records, source = read("mlflow:rag-app", store, window)
    assert [r.question for r in records] == [QUESTIONS[1]]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}

    records, source = read("mlflow:rag-app", store, SourceFilter(limit=2))
    assert [r.question for r in records] == QUESTIONS[:2]

    records, source = read("mlflow:rag-app", store, SourceFilter(metadata={"env": "prod"}))
    assert [r.question for r in records] == [QUESTIONS[1]]
    assert records[0].metadata["env"] == "prod"
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}  # filtered by MLflow itself

    records, source = read("mlflow:rag-app", store, SourceFilter(metadata={"customer": "acme"}), match="metadata")
    assert [r.question for r in records] == [QUESTIONS[0]]
    assert source.stats.as_dict() == {"traces": 1, "records": 1, "skipped": {}}

    records, _ = read("mlflow:rag-app", store, SourceFilter(since=datetime.now(timezone.utc) + timedelta(days=1)))
    assert records == []


def test_a_limit_stops_reading_pages(store, monkeypatch) -> None:
    searches = []
    search = mlflow.MlflowClient.search_traces

    def counted(self, *args, **kwargs):
        searches.append(kwargs["page_token"])
        return search(self, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "search_traces", counted)
    records, _ = read("mlflow:rag-app", store, SourceFilter(limit=1), page_size=1)
    assert [r.question for r in records] == [QUESTIONS[0]]
    assert searches == [None]  # one page of one trace, not the experiment


def test_the_filter_string_mlflow_receives() -> None:
    since = datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert filter_string(SourceFilter(since=since, until=since + timedelta(days=1), metadata={"app.env": "it's"})) == (
        "timestamp_ms >= 1793491200000 AND timestamp_ms < 1793577600000 AND tags.`app.env` = \"it's\"")
    assert filter_string(SourceFilter(metadata={"user": "u1"}), match="metadata") == "metadata.`user` = 'u1'"
    assert filter_string(SourceFilter()) is None


def test_sink_scores_land_on_the_same_traces_and_are_listed_on_the_next_read(store) -> None:
    records, _ = read("mlflow:rag-app", store, SourceFilter(limit=1))
    (record,) = records
    sink = MLflowSink()
    sink.emit(record, [Score(metric="grounding", value=0.9, higher_is_better=True, hallucinated=False,
                             reason="supported", record_id=record.id)])
    # someone else's assessment on the same trace is not groundtrace's
    mlflow.log_feedback(trace_id=record.trace_links["mlflow"], name="helpfulness", value=1.0,
                        source=mlflow.entities.AssessmentSource(source_type="HUMAN", source_id="alice"))

    assessments = {a.name: a for a in mlflow.get_trace(store["runs"][0]["trace"]).info.assessments}
    assert assessments["grounding"].value is True  # the verdict: grounded (the value is in the metadata)
    assert assessments["grounding"].metadata["value"] == "0.9"
    assert assessments["grounding"].source.source_id == "groundtrace"
    assert assessments["grounding"].trace_id == store["runs"][0]["trace"]

    again, _ = read("mlflow:rag-app", store)
    assert again[0].metadata[SCORED_KEY] == ["grounding"]
    assert (again[0].question, again[0].contexts, again[0].answer) == (record.question, record.contexts, record.answer)
    assert all(SCORED_KEY not in r.metadata for r in again[1:])


def test_an_unknown_experiment_says_so(store) -> None:
    with pytest.raises(SourceError, match=r"has no experiment named or numbered 'no-such-exp': check the name"):
        read("mlflow:no-such-exp", store)
    with pytest.raises(SourceError, match="mlflow needs an experiment"):
        list(MLflowSource().records())


def test_a_down_tracking_server_names_the_url_and_what_to_do(refused_url, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    started = time.monotonic()
    with pytest.raises(SourceError, match=rf"MLflow at {refused_url} could not be read .*start the tracking server"):
        list(MLflowSource("rag-app", tracking_uri=refused_url).records())
    assert time.monotonic() - started < 10


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("mlflow"))):
        list(MLflowSource("rag-app").records())
