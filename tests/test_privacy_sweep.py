"""The mask covers everything groundtrace writes: one application whose users' e-mail addresses appear in the
question, the passages, the answer and an exception's message, with a mask that hides them; every channel groundtrace
writes to is swept for the address afterwards: the spans and their events (a real SDK TracerProvider), the span
status of a failed request, the log records, the JSONL sink's file, the Monitor's own metrics, and the review app's
API over that file. (The span status of a failed request's span groundtrace records: test_lc_privacy.py.)"""

from __future__ import annotations

import json
import logging
import re

import pytest

import groundtrace
from groundtrace.monitor import Monitor

EMAIL = "ana.lopez@example.com"
MASK = re.compile(r"[\w.]+@[\w.]+")


def hide_email(text: str) -> str:
    return MASK.sub("<email>", text)


def test_no_channel_shows_what_the_mask_hides(tmp_path, caplog):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from groundtrace.sinks.jsonl import JsonlSink
    from groundtrace.sinks.otel import OTelSink

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    store = tmp_path / "scores.jsonl"
    caplog.set_level(logging.DEBUG, logger="groundtrace")
    monitor = Monitor(["lexical", "facts"], [OTelSink(tracer_provider=tracer_provider), JsonlSink(store)],
                      isolation="thread", flush_at_exit=False, mask=hide_email,
                      telemetry=MeterProvider(metric_readers=[reader]))

    @groundtrace.retrieval
    def account_notes(question: str) -> list[str]:
        return [f"Account {EMAIL} was opened in 2021 and pays 12 euros a month."]

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> str:
        account_notes(question)
        if "close" in question:
            raise ValueError(f"no account found for {EMAIL}")
        return f"The account {EMAIL} pays 15 euros a month since 2019."

    with tracer_provider.get_tracer("app").start_as_current_span("request"):
        answer(f"What does {EMAIL} pay?")
    try:
        with tracer_provider.get_tracer("app").start_as_current_span("request"):
            answer(f"Please close {EMAIL}")
    except ValueError:
        pass
    assert monitor.flush(30)
    monitor.close()

    written = {
        "spans": json.dumps([{"name": s.name, "attributes": dict(s.attributes), "status": s.status.description,
                              "events": [dict(e.attributes) for e in s.events]} for s in spans.get_finished_spans()
                             # the application's own spans are its own (the SDK records its exception in them)
                             if s.instrumentation_scope.name.startswith("groundtrace")]),
        "logs": caplog.text,
        "jsonl": store.read_text(encoding="utf-8"),
        "metrics": reader.get_metrics_data().to_json(),
    }
    assert "<email>" in written["jsonl"] and "groundtrace.lexical" in written["spans"]  # the sweep saw real output
    pytest.importorskip("starlette")
    from groundtrace.io import read_scored
    from groundtrace.review.app import Review
    from tests.review.test_review_app import client_for

    client, token = client_for(Review(list(read_scored(store)), tmp_path / "labels.jsonl"))
    queue = client.get("/api/queue", headers=token).json()
    written["review"] = json.dumps(queue) + "".join(
        client.get("/api/record", params={"id": item["id"]}, headers=token).text for item in queue["items"])
    leaked = {channel: re.findall(r".{80}ana.lopez@example.com.{40}", text) for channel, text in written.items()}
    assert {channel: EMAIL in text for channel, text in written.items()} == dict.fromkeys(written, False), leaked
