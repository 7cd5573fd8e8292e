"""The scores go on the request's own trace, whoever traced the app: OpenInference (Phoenix), MLflow autolog and
LangSmith's tracer, each real, each with groundtrace attached as its docs say. N requests make N traces, every score
is on a span of its request's trace, and no request gets a second trace of groundtrace's."""

from __future__ import annotations

import pytest
from groundtrace.monitor import Monitor
from groundtrace.sinks.otel import OTelSink

import groundtrace_langchain
from groundtrace_langchain import GroundtraceCallbackHandler
from lc_app import CollectingSink, rag_chain

QUESTION = "What is the capital of France?"
# one faithful answer, one contradicting its passage, one partly made up (lexical flags both)
ANSWERS = {"faithful": "Paris is the capital of France.",
           "contradicting": "Marseille has been the French capital since 1999.",
           "made_up": "Paris, home to 90 million people, became capital in 1066 under King Louis."}


def run_three(callbacks: list) -> None:
    for answer in ANSWERS.values():
        assert rag_chain(answer).invoke(QUESTION, config={"callbacks": callbacks}) == answer


def by_answer(sink: CollectingSink) -> dict[str, tuple]:
    """kind of answer -> (record, its lexical Score)."""
    kinds = {answer: kind for kind, answer in ANSWERS.items()}
    return {kinds[record.answer]: (record, scores[0]) for record, scores in sink.emitted}


@pytest.fixture
def openinference(global_tracer_provider):
    """OpenInference's LangChainInstrumentor on a real SDK provider (the global one: so groundtrace could start a
    span of its own, and must not); uninstrumented after."""
    pytest.importorskip("openinference.instrumentation.langchain")
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, exporter = global_tracer_provider
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield provider, exporter
    instrumentor.uninstrument()


@pytest.mark.parametrize("attach", ["config", "instrument"])
def test_openinference_traces_each_request_once_and_the_scores_sit_on_its_root_span(openinference, attach):
    provider, exporter = openinference
    sink = CollectingSink()
    monitor = Monitor(["lexical"], [OTelSink(tracer_provider=provider), sink], flush_at_exit=False)
    try:
        if attach == "config":
            run_three([GroundtraceCallbackHandler(monitor=monitor)])
        else:
            groundtrace_langchain.instrument(monitor=monitor)
            run_three([])
        assert monitor.flush(30)
    finally:
        groundtrace_langchain.uninstrument()
        monitor.close()

    spans = exporter.get_finished_spans()
    roots = {span.context.trace_id: span for span in spans if span.parent is None}
    assert len(roots) == 3  # three requests, three traces: OpenInference's, none of groundtrace's own
    assert not [span for span in spans if span.name.startswith("invoke_workflow")]
    assert {span.name for span in roots.values()} == {"RunnableSequence"}
    found = by_answer(sink)
    assert set(found) == set(ANSWERS)
    for record, _score in found.values():
        root = roots[int(record.trace_id, 16)]
        assert record.span_id == format(root.context.span_id, "016x")  # the request's root span, not a new one
        [evaluation] = [s for s in spans if s.name == "groundtrace.lexical" and s.parent.span_id == root.context.span_id]
        assert evaluation.context.trace_id == root.context.trace_id
    assert [found[kind][1].hallucinated for kind in ANSWERS] == [False, True, True]


def test_with_no_tracer_groundtrace_opens_one_request_span_per_request(global_tracer_provider):
    provider, exporter = global_tracer_provider
    sink = CollectingSink()
    handler = GroundtraceCallbackHandler(metrics=["lexical"], sinks=[OTelSink(tracer_provider=provider), sink],
                                         flush_at_exit=False)
    run_three([handler])
    assert handler.monitor.flush(30)
    handler.close()
    spans = exporter.get_finished_spans()
    requests = [span for span in spans if span.name == "invoke_workflow RunnableSequence"]
    assert len(requests) == 3 and len({span.context.trace_id for span in spans}) == 3
    for record in sink.records:  # each record on its request span, which lasted from the root's start to its end
        [request] = [span for span in requests if format(span.context.span_id, "016x") == record.span_id]
        assert request.start_time < request.end_time


def test_mlflow_autolog_one_trace_per_request_and_the_hallucinated_answers_read_as_fails(tmp_path):
    mlflow = pytest.importorskip("mlflow")
    from groundtrace import trace_context
    from groundtrace.capture import kit as capture
    from groundtrace.sinks.mlflow import MLflowSink
    from tests.mlflow_store import sqlite_tracking

    with sqlite_tracking(tmp_path, "tracers"):
        mlflow.langchain.autolog()
        sink = CollectingSink()
        monitor = Monitor(["lexical"], [MLflowSink(), sink], flush_at_exit=False)
        try:
            run_three([GroundtraceCallbackHandler(monitor=monitor)])
            assert monitor.flush(60) and monitor.stats.sink_errors == 0
        finally:
            mlflow.langchain.autolog(disable=True)
            monitor.close()
            trace_context.unregister_link_provider("mlflow")
            capture.reset_shared_monitor()
        mlflow.flush_trace_async_logging()
        traces = mlflow.search_traces(return_type="list")
        assert len(traces) == 3
        found = by_answer(sink)
        verdicts = {}
        for kind, (record, score) in found.items():
            trace = mlflow.get_trace(record.trace_links["mlflow"])
            [feedback] = [a for a in trace.info.assessments if a.name == "lexical"]
            verdicts[kind] = feedback.value
            assert feedback.rationale.startswith(f"{'hallucinated' if score.hallucinated else 'grounded'}: lexical ")
            assert feedback.metadata["value"] == repr(score.value)
        assert verdicts == {"faithful": True, "contradicting": False, "made_up": False}
        assert 'Unsupported: "Marseille"; "French"; "1999"' in \
            next(a for a in mlflow.get_trace(found["contradicting"][0].trace_links["mlflow"]).info.assessments
                 if a.name == "lexical").rationale


def test_langsmith_tracer_and_feedback_name_the_same_root_runs(monkeypatch):
    pytest.importorskip("langsmith")
    from tests.langsmith_api import FakeLangSmith
    from tests.loopback import LoopbackServer

    fake = FakeLangSmith([])
    with LoopbackServer(fake.respond) as server:
        traced_and_scored(server, fake, monkeypatch)


def traced_and_scored(server, fake, monkeypatch) -> None:
    from langchain_core.tracers.langchain import LangChainTracer
    from langsmith import Client
    from groundtrace.sinks.langsmith import LangSmithSink

    monkeypatch.setenv("LANGSMITH_API_KEY", "ls-test-key-0123456789")
    client = Client(api_url=server.url, api_key="ls-test-key-0123456789", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="rag-staging")
    sink = CollectingSink()
    monitor = Monitor(["lexical"], [LangSmithSink(api_url=server.url, api_key="ls-test-key-0123456789"), sink],
                      flush_at_exit=False)
    try:
        run_three([GroundtraceCallbackHandler(monitor=monitor), tracer])
        tracer.wait_for_futures()
        assert monitor.flush(30) and monitor.stats.sink_errors == 0
    finally:
        monitor.close()
    roots = {run_id for run_id, run in fake.runs.items() if not run.get("parent_run_id")}
    assert len(roots) == 3 and {run["trace_id"] for run in fake.runs.values()} == roots
    found = by_answer(sink)
    scores = {feedback["run_id"]: feedback["score"] for feedback in fake.feedback}
    assert {kind: scores[record.run_id] for kind, (record, _) in found.items()} == \
        {"faithful": 1.0, "contradicting": 0.0, "made_up": 0.0}


def test_a_live_phoenix_shows_three_traces_each_with_its_annotations_on_its_root_span(openinference, tmp_path):
    """Phoenix as its docs set it up: OpenInference's spans exported over OTLP to a live ``phoenix serve``, groundtrace's
    PhoenixSink annotating. Read back through Phoenix's own API."""
    pytest.importorskip("phoenix.client")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from phoenix.client import Client

    from groundtrace.sinks.phoenix import PhoenixSink
    from tests.phoenix_server import phoenix_serve

    provider, _ = openinference
    with phoenix_serve(tmp_path) as url:
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10)))
        sink = CollectingSink()
        monitor = Monitor(["lexical"], [PhoenixSink(base_url=url, backoff_s=0.25, max_attempts=8), sink],
                          flush_at_exit=False)
        try:
            run_three([GroundtraceCallbackHandler(monitor=monitor)])
            assert monitor.flush(60) and monitor.stats.sink_errors == 0
        finally:
            monitor.close()
        client = Client(base_url=url)
        spans = client.spans.get_spans(project_identifier="default", limit=1000)
        roots = {span["context"]["span_id"]: span for span in spans if not span.get("parent_id")}
        assert len(roots) == 3 and len({span["context"]["trace_id"] for span in spans}) == 3
        found = by_answer(sink)
        annotations = client.spans.get_span_annotations(span_ids=list(roots), project_identifier="default")
        on = {a["span_id"]: a for a in annotations if a["name"] == "lexical"}
        labels = {kind: on[record.span_id]["result"]["label"] for kind, (record, _) in found.items()}
        assert labels == {"faithful": "grounded", "contradicting": "hallucinated", "made_up": "hallucinated"}
        explanation = on[found["made_up"][0].span_id]["result"]["explanation"]
        assert explanation.startswith("hallucinated: lexical 0.04 (threshold 0.40; higher is better)\nUnsupported: ")
        assert '"1066"' in explanation and roots[found["made_up"][0].span_id]["name"] == "RunnableSequence"


def test_langfuse_callback_traces_each_request_once_and_the_scores_name_its_trace_and_root_observation(
        global_tracer_provider):
    """Langfuse's own LangChain callback traces the app (its spans over OTLP to a loopback capture of Langfuse's
    API); groundtrace's LangfuseSink sends the scores there too. The scores name the trace and root observation the
    callback made, whatever span was current."""
    pytest.importorskip("langfuse.langchain")
    from google.protobuf.message import DecodeError
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.trace import TracerProvider

    from groundtrace.sinks.langfuse import LangfuseSink
    from tests.loopback import LoopbackServer

    spans, scores = [], []

    def respond(request):
        if request.path == "/api/public/otel/v1/traces":
            try:
                export = ExportTraceServiceRequest.FromString(request.body)
            except DecodeError:
                return 400, {"message": "not OTLP protobuf"}
            spans.extend(span for rs in export.resource_spans for ss in rs.scope_spans for span in ss.spans)
            return 200, {}
        if request.path == "/api/public/scores":
            scores.extend(request.json)
            return 200, {"successes": [], "errors": []}
        return 404, {"message": request.path}

    public, secret = "pk-lf-tracers-0001", "sk-lf-tracers-0001"
    with LoopbackServer(respond) as server:
        langfuse = Langfuse(public_key=public, secret_key=secret, host=server.url, tracer_provider=TracerProvider(),
                            otel_compression="none", flush_at=1)
        sink = CollectingSink()
        monitor = Monitor(["lexical"], [LangfuseSink(public_key=public, secret_key=secret, host=server.url), sink],
                          flush_at_exit=False)
        try:
            traced = CallbackHandler(public_key=public)
            trace_ids = []
            for answer in ANSWERS.values():
                rag_chain(answer).invoke(QUESTION, config={"callbacks": [GroundtraceCallbackHandler(monitor=monitor),
                                                                         traced]})
                trace_ids.append(traced.last_trace_id)
            langfuse.flush()
            assert monitor.flush(30) and monitor.stats.sink_errors == 0
        finally:
            monitor.close()
            langfuse.shutdown()
    roots = {span.trace_id.hex(): span.span_id.hex() for span in spans if not span.parent_span_id}
    assert len(roots) == 3 and set(roots) == set(trace_ids) == {span.trace_id.hex() for span in spans}
    found = by_answer(sink)
    sent = {(score["traceId"], score["observationId"]): score for score in scores}
    assert set(sent) == set(roots.items())  # each score on its request's trace and root observation
    kinds = {record.trace_links["langfuse"]: kind for kind, (record, _) in found.items()}
    assert {kinds[f"{t}/{o}"]: (score["dataType"], score["value"]) for (t, o), score in sent.items()} == {
        "faithful": ("BOOLEAN", 1.0), "contradicting": ("BOOLEAN", 0.0), "made_up": ("BOOLEAN", 0.0)}


def test_openllmetry_traces_each_request_once_and_the_scores_sit_on_its_root_span(global_tracer_provider, monkeypatch):
    """OpenLLMetry's LangChain instrumentor (opentelemetry-instrumentation-langchain) adds its callback to every
    callback manager and makes its spans current; groundtrace's handler, first in the list, sees none at the root's
    start and finds the root's span in the callback's own map."""
    pytest.importorskip("opentelemetry.instrumentation.langchain")
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    from langchain_core.callbacks import BaseCallbackManager

    # OpenLLMetry 0.62.4's uninstrument() leaves BaseCallbackManager.__init__ wrapped (its handler in every later
    # callback manager of the process): put the original back after this test. It leaves other wraps too, so this
    # test stays the last of this directory's (the LlamaIndex tests after it use no LangChain callbacks)
    monkeypatch.setattr(BaseCallbackManager, "__init__", BaseCallbackManager.__init__)
    provider, exporter = global_tracer_provider
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    sink = CollectingSink()
    monitor = Monitor(["lexical"], [sink], flush_at_exit=False)
    try:
        run_three([GroundtraceCallbackHandler(monitor=monitor)])
        assert monitor.flush(30)
    finally:
        instrumentor.uninstrument()
        monitor.close()
    spans = exporter.get_finished_spans()
    roots = {span.context.trace_id: span for span in spans if span.parent is None}
    assert len(roots) == 3 and not [span for span in spans if span.name.startswith("invoke_workflow")]
    for record in sink.records:
        assert record.span_id == format(roots[int(record.trace_id, 16)].context.span_id, "016x")
