"""Real RAG applications, instrumented by OpenInference's own instrumentors, and the span exporters
a deployment would use: OTLP JSON lines (what the Collector's file exporter writes), the SDK's
``span.to_json()`` (ConsoleSpanExporter into a file), OTLP/HTTP to Phoenix, and memory (for the ids).

Each run returns what the application itself received and returned, so a test can assert that a
source rebuilds exactly that."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# the integrations' test applications: a LangChain LCEL chain and a LlamaIndex index, no mocks
sys.path.insert(0, str(ROOT / "integrations" / "langchain" / "tests"))
sys.path.insert(0, str(ROOT / "integrations" / "llamaindex" / "tests"))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter, SpanExportResult)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@dataclass
class Request:
    """One request as the application saw it, and the ids of its root span."""

    question: str
    contexts: list[str]
    answer: str
    trace_id: str = ""
    span_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None


class OtlpJsonLinesExporter(SpanExporter):
    """OTLP JSON, one ExportTraceServiceRequest per line, as the Collector's file exporter writes it:
    the SDK's own protobuf encoder, then protobuf's JSON mapping (ids come out base64)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        line = json.dumps(MessageToDict(encode_spans(spans)), ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
        return SpanExportResult.SUCCESS


def tracer_provider(project: str, *exporters: SpanExporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def sdk_json_exporter(path: Path) -> ConsoleSpanExporter:
    """The SDK's ConsoleSpanExporter into a file: ``span.to_json()``, pretty-printed, one after another."""
    return ConsoleSpanExporter(out=path.open("a", encoding="utf-8"))


@contextmanager
def instrumented(provider: TracerProvider) -> Iterator[None]:
    """LangChain and LlamaIndex traced by OpenInference into ``provider``; undone after, so other
    tests see neither instrumentor."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
    LlamaIndexInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
    try:
        yield
    finally:
        LangChainInstrumentor().uninstrument()
        LlamaIndexInstrumentor().uninstrument()


# ------------------------------------------------------------------------------ the applications
def langchain_rag(question: str, answer: str) -> Request:
    """retriever (an in-memory vector store) | prompt | chat model | parser; the documents the chain
    was given are recorded by its own formatting step."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import RunnablePassthrough
    from lc_app import PROMPT, vector_retriever

    seen, context = recording_context()
    chain = ({"context": vector_retriever(k=2) | context, "question": RunnablePassthrough()}
             | PROMPT | FakeListChatModel(responses=[answer]) | StrOutputParser())
    return Request(question, seen, chain.invoke(question))


def recording_context() -> tuple[list[str], Any]:
    """The chain's step that formats the retrieved documents into the prompt, recording their texts:
    the contexts the application really used."""
    from langchain_core.runnables import RunnableLambda
    from lc_app import format_documents

    seen: list[str] = []

    def context(documents: list) -> str:
        seen.extend(d.page_content for d in documents)
        return format_documents(documents)

    return seen, RunnableLambda(context)


def llamaindex_query(index: Any, question: str) -> Request:
    from li_support import ScriptedLLM

    response = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=2).query(question)
    return Request(question, [n.node.get_content() for n in response.source_nodes], str(response))


def langchain_without_retriever(question: str) -> str:
    """prompt | chat model | parser over a fixed context: a chain, but not a RAG request."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from lc_app import PROMPT

    chain = PROMPT | FakeListChatModel(responses=["I cannot tell."]) | StrOutputParser()
    return chain.invoke({"context": "no passages", "question": question})


def bare_llm_call(prompt: str) -> str:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    return FakeListChatModel(responses=["Hello."]).invoke(prompt).content


def root_ids(memory: InMemorySpanExporter, since: int) -> tuple[str, str]:
    """(trace id, span id) of the one root span finished since the exporter held ``since`` spans."""
    (root,) = [s for s in memory.get_finished_spans()[since:] if s.parent is None]
    return format(root.context.trace_id, "032x"), format(root.context.span_id, "016x")


# ------------------------------------------------------------------------------ logged traffic
LC_QUESTIONS = ("What is the capital of France?", "When was the Eiffel Tower completed?")
LC_ANSWERS = ("Paris is the capital of France.", "The Eiffel Tower was completed in 1889.")


@dataclass
class Traffic:
    """Five requests in this order: LangChain RAG (env=staging, tag nightly, session chat-a), LangChain RAG
    (env=prod), then after ``middle``: LlamaIndex query (env=staging, session chat-b), a LangChain chain without
    retriever, a bare LLM call. ``rag`` holds the three RAG requests in that order."""

    rag: list[Request]
    started: Any
    middle: Any
    ended: Any
    not_rag: int = 2


def log_traffic(provider: TracerProvider, memory: InMemorySpanExporter) -> Traffic:
    import time
    from datetime import datetime, timezone

    from li_support import QUESTION, build_index
    from openinference.instrumentation import using_attributes

    index = build_index()  # before instrumenting: indexing is not a request

    def now() -> datetime:
        time.sleep(0.02)  # marks strictly between the requests' start times
        return datetime.now(timezone.utc)

    def traced(run, metadata: dict[str, str], tags: list[str] = (), session: str | None = None) -> Request:
        before = len(memory.get_finished_spans())
        with using_attributes(metadata=metadata, tags=list(tags), session_id=session or ""):  # OpenInference's session.id
            request = run()
        request.trace_id, request.span_id = root_ids(memory, before)
        request.metadata, request.session_id = metadata, session
        return request

    with instrumented(provider):
        started = now()
        rag = [traced(lambda: langchain_rag(LC_QUESTIONS[0], LC_ANSWERS[0]), {"env": "staging"}, ["nightly"], "chat-a"),
               traced(lambda: langchain_rag(LC_QUESTIONS[1], LC_ANSWERS[1]), {"env": "prod"})]
        middle = now()
        rag.append(traced(lambda: llamaindex_query(index, QUESTION), {"env": "staging"}, session="chat-b"))
        langchain_without_retriever("What is the capital of France?")
        bare_llm_call("Say hello.")
        ended = now()
    provider.force_flush()
    return Traffic(rag, started, middle, ended)


def langchain_rag_dict_input(question: str, answer: str) -> Request:
    """The same chain over a dict input ({"question", "user"}), as most applications call theirs."""
    from operator import itemgetter

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from lc_app import PROMPT, vector_retriever

    seen, context = recording_context()
    chain = ({"context": itemgetter("question") | vector_retriever(k=1) | context,
              "question": itemgetter("question")} | PROMPT | FakeListChatModel(responses=[answer]) | StrOutputParser())
    return Request(question, seen, chain.invoke({"question": question, "user": "u-42"}))


def langgraph_rag(question: str) -> Request:
    """lc_app's LangGraph StateGraph: retrieve -> generate, state in and out."""
    from lc_app import rag_graph

    state = rag_graph().invoke({"question": question})
    return Request(question, [d.page_content for d in state["documents"]], state["answer"])
