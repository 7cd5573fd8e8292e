"""OpenTelemetry sink: each Score as a ``gen_ai.evaluation.result`` event and an EVALUATOR carrier span.

- The event (OpenTelemetry GenAI conventions): a log record emitted through OpenTelemetry's logs API in
  the span context of the span it evaluates (the request span the Record points at), so that a backend
  shows it on that span. Where the process has no LoggerProvider it is a span event on the carrier
  instead: the only path a traces-only setup can see.
- The carrier span (OpenInference's annotation spec for results that come after the fact): an EVALUATOR
  span with exactly one link to the evaluated span, ``evaluations.0.evaluation.*`` with the kind of judge
  (``LLM`` or ``CODE``), and the ``gen_ai.evaluation.*`` attributes. It is a child of the evaluated span,
  so that trace views show it there; the link, not the parentage, names the target.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from groundtrace._extras import missing_extra
from groundtrace.config import Settings
from groundtrace.record import Record
from groundtrace.redaction import RateLimitedWarning, get_logger
from groundtrace.score import Score
from groundtrace.sinks import Sink, score_label, spans_summary
from groundtrace.sinks.results import genai_attributes, openinference_attributes, response_id

log = get_logger("groundtrace.sinks.otel")
EVENT_NAME = "gen_ai.evaluation.result"


def otlp_provider(endpoint: str, on_undelivered: Callable[[int], None] | None = None) -> Any:
    """An SDK tracer provider that sends spans over OTLP/HTTP (protobuf) to ``endpoint``. ``on_undelivered(n)``
    is told how many records' spans an export failed to deliver (the collector down, after the exporter's
    own retries), so that they are counted as sink errors instead of delivered."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    except ImportError as error:
        raise missing_extra("otlp", "sending the otel sink's spans over OTLP", error) from None

    class Counted(SpanExporter):
        """The OTLP exporter, counting the records whose spans it could not deliver."""

        def __init__(self) -> None:
            self.inner = OTLPSpanExporter(endpoint=endpoint)

        def export(self, spans: Any) -> Any:
            result = self.inner.export(spans)
            if result != SpanExportResult.SUCCESS and on_undelivered is not None:
                records = {span.attributes.get("groundtrace.record_id") or span.context.span_id for span in spans}
                _undelivered.failed(f"the OTLP endpoint {endpoint} did not take {len(spans)} span(s)", len(records))
                on_undelivered(len(records))
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

    provider = TracerProvider(resource=Resource.create({"service.name": "groundtrace"}))
    provider.add_span_processor(BatchSpanProcessor(Counted()))
    return provider


_undelivered = RateLimitedWarning(log, "the otel sink's spans were not delivered")


class OTelSink(Sink):
    name = "otel"

    def __init__(self, tracer_provider: Any = None, *, owns_provider: bool = False,
                 logger_provider: Any = None) -> None:
        """``tracer_provider`` / ``logger_provider``: where the carrier spans and the events go; by default
        the process's (resolved per record)."""
        try:
            from opentelemetry import trace
        except ImportError as error:
            raise missing_extra("otel", "the OpenTelemetry sink", error) from None
        self._trace = trace
        self._provider = tracer_provider
        self._logger_provider = logger_provider
        self._owns_provider = owns_provider
        self._provider_seen = tracer_provider is not None  # once a real provider is seen, no more checks
        self._warned = False
        # told how many records' spans the provider groundtrace built could not deliver (set by the Monitor)
        self.report_undelivered: Callable[[int], None] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> OTelSink:
        """The application's tracer provider (resolved per call); in a process that has none (the
        command line) and an OTLP endpoint in the settings, a provider of its own that exports there, whose
        failed exports are counted (a Monitor sets ``report_undelivered``: its sink_errors)."""
        sink = cls()
        if settings.otlp_traces_endpoint and not sink.has_provider():
            sink = cls(owns_provider=True)
            sink._provider = otlp_provider(settings.otlp_traces_endpoint, sink._undelivered)
            sink._provider_seen = True
        return sink

    def _undelivered(self, records: int) -> None:
        if self.report_undelivered is not None:
            self.report_undelivered(records)

    def has_provider(self) -> bool:
        """Whether spans go anywhere: a provider was given or the process installed a real one."""
        provider = self._provider or self._trace.get_tracer_provider()
        return not isinstance(provider, (self._trace.ProxyTracerProvider, self._trace.NoOpTracerProvider))

    def undeliverable(self) -> str | None:
        if self.has_provider():
            return None
        return ("this process has no OpenTelemetry tracer provider to send spans with; set "
                "OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) to where your traces go, "
                "e.g. http://127.0.0.1:4318")

    def _recording(self) -> bool:
        """Whether emitted spans go anywhere; says once why not. Asked at emit time (the application may
        install its provider after the sink is built), until a real provider is seen."""
        if self._provider_seen:
            return True
        if self.has_provider():
            self._provider_seen = True
            return True
        if not self._warned:
            self._warned = True
            log.warning(
                "groundtrace: the otel sink records no scores: this process has no OpenTelemetry TracerProvider. "
                "Set one up with opentelemetry-sdk (trace.set_tracer_provider(TracerProvider()) plus an exporter), "
                "or run under opentelemetry-instrument, or add jsonl to the sinks (sinks=[\"otel\", \"jsonl\"])")
        return False

    def flush(self) -> None:
        if self._owns_provider:
            self._provider.force_flush()

    def close(self) -> None:
        if self._owns_provider:
            self._provider.shutdown()  # exports what the batch processor still holds

    @property
    def _tracer(self) -> Any:
        # resolved per call: the application may install its provider after groundtrace starts
        provider = self._provider or self._trace.get_tracer_provider()
        return provider.get_tracer("groundtrace")

    def _event_logger(self) -> Any:
        """A logger of the given or the process's LoggerProvider; None where there is none (the no-op or
        proxy provider of the API alone). Resolved per record: the application may install it late."""
        provider = self._logger_provider
        if provider is None:
            logs = sys.modules.get("opentelemetry._logs")
            if logs is None:
                return None
            provider = logs.get_logger_provider()
        if type(provider).__name__ in ("NoOpLoggerProvider", "ProxyLoggerProvider"):
            return None
        return provider.get_logger("groundtrace")

    def emit(self, record: Record, scores: list[Score]) -> None:
        from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

        if not self._recording():
            return
        if not record.trace_id or not record.span_id:
            log.debug("record %s has no trace/span id: nothing to attach the scores to", record.id)
            return
        evaluated = SpanContext(
            trace_id=int(record.trace_id, 16), span_id=int(record.span_id, 16), is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        context = self._trace.set_span_in_context(NonRecordingSpan(evaluated))
        tracer, events = self._tracer, self._event_logger()
        reply_id = response_id(record)
        for score in scores:
            event = genai_attributes(score, reply_id)
            span_attributes = {
                "openinference.span.kind": "EVALUATOR",
                **event,
                **openinference_attributes(score),
                "output.value": json.dumps({"score": score.value, "label": score_label(score),
                                            "explanation": score.reason or score.error}, ensure_ascii=False),
                "output.mime_type": "application/json",
                "groundtrace.metric": score.metric,
                "groundtrace.higher_is_better": score.higher_is_better,
                "groundtrace.unsupported_spans": json.dumps(spans_summary(score), ensure_ascii=False),
                "groundtrace.unsupported_text": [span.text for span in score.spans[:20]],
            }
            if score.threshold is not None:
                span_attributes["groundtrace.threshold"] = score.threshold
            if score.record_id:
                span_attributes["groundtrace.record_id"] = score.record_id
            if record.session_id:
                # both names viewers group conversations by: GenAI's and OpenInference's (Phoenix)
                span_attributes["gen_ai.conversation.id"] = span_attributes["session.id"] = record.session_id
            span = tracer.start_span(f"groundtrace.{score.metric}", context=context, kind=SpanKind.INTERNAL,
                                     attributes=span_attributes, links=[Link(evaluated)])
            if events is not None:  # the event where the conventions put it: a log record on the evaluated span
                events.emit(event_name=EVENT_NAME, context=context, attributes=event)
            else:
                span.add_event(EVENT_NAME, attributes=event)
            if score.error is not None:
                span.set_status(Status(StatusCode.ERROR, score.error[:200]))
            span.end()
