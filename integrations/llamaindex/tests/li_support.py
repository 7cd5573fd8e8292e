"""Real LlamaIndex parts for the tests: documents in Russian and English, an index over them with
MockEmbedding, and an LLM with a fixed, grounded answer (MockLLM only echoes the prompt)."""

from __future__ import annotations

import re
import threading
from typing import Any

from groundtrace import Record, Score
from groundtrace.sinks import Sink
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter

from groundtrace_llamaindex import GroundtraceEventHandler, GroundtraceSpanHandler

DORM_RU = "Плата за проживание в общежитии СПбГУ составляет 1 879 рублей в месяц."
DORM_EN = "The dormitory fee at Saint Petersburg State University is 1,879 rubles per month."
CITY_RU = "Казань — столица Республики Татарстан."
CITY_EN = "Paris is the capital of France."
DOCUMENTS = [
    Document(id_="dorm-ru", text=DORM_RU, metadata={"lang": "ru", "source": "spbu.ru/dorm"}),
    Document(id_="dorm-en", text=DORM_EN, metadata={"lang": "en", "source": "spbu.ru/en/dorm"}),
    Document(id_="city-ru", text=CITY_RU, metadata={"lang": "ru", "source": "wiki/ru/Kazan"}),
    Document(id_="city-en", text=CITY_EN, metadata={"lang": "en", "source": "wiki/en/Paris"}),
]
# MockEmbedding gives every text the same vector, so every node scores the same and the top 2 are
# decided by node id: with these ids, the two dormitory documents, English first.
TOP_K = 2
CONTEXTS = [DORM_EN, DORM_RU]
QUESTION = "Сколько стоит общежитие СПбГУ?"
ANSWER = "Плата за проживание в общежитии СПбГУ составляет 1 879 рублей в месяц."


def expected_nodes(score: Any) -> list[dict[str, Any]]:
    return [
        {"id": "dorm-en#0", "score": score, "metadata": {"lang": "en", "source": "spbu.ru/en/dorm"}},
        {"id": "dorm-ru#0", "score": score, "metadata": {"lang": "ru", "source": "spbu.ru/dorm"}},
    ]


def build_index() -> VectorStoreIndex:
    # fixed node ids ("<document id>#<chunk>") make retrieval order, and so the contexts, exact
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=0, id_func=lambda i, doc: f"{doc.doc_id}#{i}")
    return VectorStoreIndex.from_documents(DOCUMENTS, embed_model=MockEmbedding(embed_dim=8),
                                           transformations=[splitter])


class ScriptedLLM(CustomLLM):
    """A completion LLM with a scripted answer.

    ``echo_query``: answer "Answer to: <query>" from the prompt's "Query:" line, so that concurrent
    requests can be told apart. ``fail``: "call" raises when called, "stream" raises after the first
    streamed token. ``barrier``: every call waits there (all requests in flight at once).
    ``gate``: a stream waits there after its first token (the test decides when it ends).
    ``routes``: a prompt that contains a key is answered with its value (a condense or rerank prompt).
    ``reply_id``: the provider's id of each reply, in the response's ``raw`` (as OpenAI's LLM puts it).
    """

    answer: str = ANSWER
    routes: dict[str, str] = {}
    echo_query: bool = False
    fail: str | None = None
    barrier: Any = None
    gate: Any = None
    reply_id: str | None = None

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    def _answer(self, prompt: str) -> str:
        if self.fail == "call":
            raise RuntimeError("the LLM is down")
        if self.barrier is not None:
            self.barrier.wait(timeout=20)
        for marker, reply in self.routes.items():
            if marker in prompt:
                return reply
        if self.echo_query:
            match = re.search(r"Query: (.*)\nAnswer:", prompt)
            return f"Answer to: {match.group(1) if match else '?'}"
        return self.answer

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._answer(prompt), raw={"id": self.reply_id} if self.reply_id else None)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        answer = self._answer(prompt)

        def tokens():
            text = ""
            for i, token in enumerate(re.findall(r"\S+\s*", answer)):
                if i == 1 and self.gate is not None:
                    self.gate.wait(timeout=20)
                if i == 1 and self.fail == "stream":
                    raise RuntimeError("the stream broke")
                text += token
                yield CompletionResponse(text=text, delta=token)

        return tokens()


def stream_tokens(answer: str = ANSWER) -> list[str]:
    return re.findall(r"\S+\s*", answer)


class CollectSink(Sink):
    """Keeps every (record, scores) the Monitor delivers."""

    name = "collect"

    def __init__(self) -> None:
        self.rows: list[tuple[Record, list[Score]]] = []
        self._lock = threading.Lock()

    def emit(self, record: Record, scores: list[Score]) -> None:
        with self._lock:
            self.rows.append((record, scores))

    @property
    def records(self) -> list[Record]:
        return [record for record, _ in self.rows]


def our_handlers() -> list:
    dispatcher = get_dispatcher()
    return [h for h in dispatcher.span_handlers + dispatcher.event_handlers
            if isinstance(h, (GroundtraceSpanHandler, GroundtraceEventHandler))]


def our_span_handler() -> GroundtraceSpanHandler:
    (handler,) = [h for h in get_dispatcher().span_handlers if isinstance(h, GroundtraceSpanHandler)]
    return handler


def assert_nothing_left() -> None:
    """No open root and no filed span: a finished request leaves nothing behind."""
    tracker = our_span_handler().tracker
    assert (tracker.open_roots, tracker.tracked_spans) == (0, 0)


def assert_the_record(instrumented: Any, sink: Any, root: str) -> None:
    """The one Record the request made, of the root named ``root``: the question, the retrieved contexts and the
    answer, the nodes' metadata with their scores, and nothing left behind."""
    import pytest

    assert instrumented.flush(10)
    [record] = sink.records
    assert record.id.startswith(f"{root}-")
    assert (record.question, record.contexts, record.answer) == (QUESTION, CONTEXTS, ANSWER)
    assert record.metadata == {"nodes": expected_nodes(pytest.approx(1.0))}
    assert_nothing_left()
