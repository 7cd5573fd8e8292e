"""No secret leaves in a text groundtrace writes: a judge that echoes its Authorization header in its
error bodies (as some gateways do), scored through the command line into every sink that can run
here and through a live Monitor into OpenTelemetry; then every payload, file, console line and log
line is searched for the key."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator

import pytest

pytest.importorskip("openai")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from groundtrace.cli import app  # noqa: E402
from groundtrace.monitor import Monitor  # noqa: E402
from groundtrace.record import Record  # noqa: E402
from groundtrace.sinks.jsonl import JsonlSink  # noqa: E402
from groundtrace.sinks.otel import OTelSink  # noqa: E402
from tests.loopback import LoopbackServer, Reply, Request  # noqa: E402

# an opaque key (no token shape): only its registration as a configured secret can hide it
JUDGE_KEY = "gt-" + secrets.token_hex(16)
LANGFUSE_PUBLIC, LANGFUSE_SECRET = "pk-lf-" + secrets.token_hex(8), "sk-lf-" + secrets.token_hex(12)
LANGSMITH_KEY = "lsv2_pt_" + secrets.token_hex(16)
ALL_SECRETS = (JUDGE_KEY, LANGFUSE_PUBLIC, LANGFUSE_SECRET, LANGSMITH_KEY)
FAILURES = ("400", "401", "403", "500", "stream")
TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
RUN_ID = "1f0e4d2c-3b5a-4c6d-8e9f-0a1b2c3d4e5f"


def echoing_judge(request: Request) -> Reply:
    """Every reply an error that repeats the Authorization header, whole and as the bare key."""
    auth = request.headers.get("authorization", "")
    said = f"Incorrect API key provided: {auth.removeprefix('Bearer ')}. Headers: Authorization: {auth}"
    prompt = json.dumps(request.json)
    failure = next(f for f in FAILURES if f"[fail {f}]" in prompt)
    if failure == "stream":
        event = json.dumps({"error": {"message": said, "type": "server_error"}})
        return Reply(200, body=f"data: {event}\n\n".encode(), content_type="text/event-stream")
    return Reply(int(failure), {"error": {"message": said, "type": "invalid_request_error", "code": failure}})


def answer(failure: str) -> str:
    return f"The Eiffel Tower is 330 metres tall. [fail {failure}]"


def records() -> list[dict]:
    return [{"id": f"r-{failure}", "question": "How tall is the Eiffel Tower?",
             "contexts": ["The Eiffel Tower is 330 metres tall."], "answer": answer(failure),
             "trace_id": TRACE_ID, "span_id": SPAN_ID, "run_id": RUN_ID} for failure in FAILURES]


JUDGE_OPTIONS = {"cache": False, "max_retries": 0, "backoff_s": 0.01}


def leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [secret for secret in ALL_SECRETS if secret in text]


@pytest.fixture
def judge(monkeypatch) -> Iterator[LoopbackServer]:
    with LoopbackServer(echoing_judge) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
        monkeypatch.setenv("GROUNDTRACE_JUDGE_MODEL", "gpt-4o-mini")
        yield server


def check_the_judge_echoed(judge: LoopbackServer) -> None:
    """The test means something only if the key went out and came back in every failure."""
    assert judge.requests and all(r.headers["authorization"] == f"Bearer {JUDGE_KEY}" for r in judge.requests)
    prompts = " ".join(r.body.decode() for r in judge.requests)
    assert all(f"[fail {failure}]" in prompts for failure in FAILURES)


def check_reasons(rows: list[dict]) -> None:
    """Each error says what failed and keeps its advice; the key's place says [redacted]."""
    errors = {row["id"]: next(s["error"] for s in row["scores"] if s["metric"] == "faithfulness") for row in rows}
    assert set(errors) == {f"r-{failure}" for failure in FAILURES}
    assert "HTTP 401: check OPENAI_API_KEY (api_key=)" in errors["r-401"]
    assert "HTTP 403" in errors["r-403"] and "HTTP 500" in errors["r-500"] and "HTTP 400" in errors["r-400"]
    assert "no chat completion" in errors["r-stream"]
    assert all("Incorrect API key provided: [redacted]" in error for error in errors.values()), errors


# ---------------------------------------------------------------------------- the command line
@pytest.fixture
def platforms(monkeypatch, tmp_path) -> Iterator[dict[str, LoopbackServer]]:
    """LangSmith, Langfuse and Phoenix as loopback capture servers, configured as the SDKs read them."""
    from tests.sinks.test_sink_langsmith import langsmith_api

    with LoopbackServer(langsmith_api()) as langsmith, \
            LoopbackServer(lambda request: (202, {"message": "Accepted"})) as langfuse, \
            LoopbackServer(lambda request: (200, {"data": [{"id": "U3BhbkFubm90YXRpb246MQ=="}]})) as phoenix:
        monkeypatch.setenv("LANGSMITH_ENDPOINT", langsmith.url)
        monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)
        monkeypatch.setenv("LANGFUSE_HOST", langfuse.url)
        monkeypatch.delenv("LANGFUSE_BASE_URL", raising=False)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", LANGFUSE_PUBLIC)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", LANGFUSE_SECRET)
        for name in ("PHOENIX_ENDPOINT", "PHOENIX_BASE_URL", "PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_CLIENT_HEADERS",
                     "PHOENIX_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", phoenix.url)
        monkeypatch.setenv("GROUNDTRACE_JSONL_PATH", str(tmp_path / "sink.jsonl"))
        yield {"langsmith": langsmith, "langfuse": langfuse, "phoenix": phoenix}


@pytest.fixture
def mlflow_trace(tmp_path) -> Iterator[str]:
    """A real MLflow trace in a sqlite store, for the MLflow sink to put its assessments on."""
    mlflow = pytest.importorskip("mlflow")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("secrets", (tmp_path / "artifacts").as_uri()))

    @mlflow.trace
    def request() -> str | None:
        return mlflow.get_active_trace_id()

    trace_id = request()
    mlflow.flush_trace_async_logging()
    yield trace_id
    mlflow.set_tracking_uri(previous)


def test_the_key_an_echoing_judge_returns_reaches_no_sink_console_or_log(judge, platforms, mlflow_trace, tmp_path,
                                                                          caplog) -> None:
    import mlflow

    caplog.set_level(logging.DEBUG, logger="groundtrace")
    inputs = tmp_path / "answers.jsonl"
    inputs.write_text("".join(json.dumps({**row, "trace_links": {"mlflow": mlflow_trace}}) + "\n" for row in records()))
    output = tmp_path / "scores.jsonl"
    options = [f"-Ofaithfulness.{key}={json.dumps(value)}" for key, value in JUDGE_OPTIONS.items()]

    result = CliRunner().invoke(app, ["score", str(inputs), "-m", "faithfulness,lexical", "-o", str(output), "--show", "5",
                                      "--sinks", "jsonl,langsmith,langfuse,phoenix,mlflow", *options])

    assert result.exit_code == 3, result.output  # the judge failed on every record: faithfulness measured nothing
    check_the_judge_echoed(judge)
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    check_reasons(rows)
    assessments = [a.to_dictionary() for a in mlflow.get_trace(mlflow_trace).info.assessments]
    assert {a["assessment_name"] for a in assessments} == {"faithfulness", "lexical"}
    delivered = {
        "output": output.read_text(),
        "jsonl sink": (tmp_path / "sink.jsonl").read_text(),
        "console": result.output + (result.stderr if result.stderr_bytes is not None else ""),
        "log": caplog.text,
        "mlflow": json.dumps(assessments),
    }
    for name, server in platforms.items():
        assert server.requests, f"nothing reached {name}"
        delivered[name] = b"\n".join(r.body for r in server.requests).decode()
    assert "[redacted]" in delivered["langfuse"] and "[redacted]" in delivered["phoenix"]
    assert {name: leaks(text) for name, text in delivered.items() if leaks(text)} == {}


# ------------------------------------------------------------------------------- a live Monitor
class FailingSink:
    """A sink whose SDK error quotes a credential: the Monitor logs it."""

    def emit(self, record: Record, scores: list) -> None:
        raise RuntimeError(f"upstream said: Authorization: Bearer {JUDGE_KEY}, key {JUDGE_KEY}")


def test_a_monitor_sends_no_key_to_opentelemetry_a_jsonl_file_or_the_log(judge, tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="groundtrace")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    path = tmp_path / "live.jsonl"
    # metrics by name: they run in a child process, which reads the same key from its environment
    with Monitor(["faithfulness"], [OTelSink(provider), JsonlSink(path), FailingSink()], flush_at_exit=False,
                 options={"faithfulness": JUDGE_OPTIONS}) as monitor:
        for row in records():
            monitor.submit(Record(**row))
        assert monitor.flush(60)
        assert monitor.stats.sink_errors == len(FAILURES)

    check_the_judge_echoed(judge)
    check_reasons([json.loads(line) for line in path.read_text().splitlines()])
    spans = exporter.get_finished_spans()
    assert len(spans) == len(FAILURES)
    attributes = json.dumps([{**dict(s.attributes), "status": s.status.description,
                              "events": [dict(e.attributes) for e in s.events]} for s in spans])
    assert "[redacted]" in attributes
    assert "sink FailingSink failed: record r-400: RuntimeError: upstream said: Authorization: [redacted], key [redacted]" in caplog.text
    assert {"otel": leaks(attributes), "jsonl": leaks(path.read_text()), "log": leaks(caplog.text)} == \
        {"otel": [], "jsonl": [], "log": []}


def test_an_exception_logged_with_its_traceback_is_redacted(caplog) -> None:
    from groundtrace.redaction import get_logger, register_secrets

    register_secrets(JUDGE_KEY)
    log = get_logger("groundtrace.test")
    caplog.set_level(logging.DEBUG, logger="groundtrace")
    try:
        raise ValueError(f"the proxy answered: key={JUDGE_KEY}")
    except ValueError:
        log.exception("calling %s failed", f"https://user:{JUDGE_KEY}@example.invalid")
    assert "calling https://user:[redacted]@example.invalid failed" in caplog.text
    assert "ValueError: the proxy answered: key=[redacted]" in caplog.text
    assert not leaks(caplog.text)


def test_the_loopback_event_stream_is_what_the_judge_client_gets(judge) -> None:
    """The streamed error is no JSON body: the client says so, quoting the event, redacted."""
    from pydantic import BaseModel

    from groundtrace.backends.judge import JudgeClient, JudgeError

    class Verdict(BaseModel):
        ok: bool

    client = JudgeClient("gpt-4o-mini", base_url=f"{judge.url}/v1", api_key=JUDGE_KEY, **JUDGE_OPTIONS)
    with pytest.raises(JudgeError) as caught:
        client.complete([{"role": "user", "content": answer("stream")}], Verdict)
    assert caught.value.kind == "server"
    assert "server said: Incorrect API key provided: [redacted]. Headers: Authorization: [redacted]" in str(caught.value)
    assert not leaks(str(caught.value))

