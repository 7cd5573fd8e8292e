"""A small but real RAG application for the tests: a keyword retriever and a vector-store retriever
over Russian and English passages, LCEL chains with langchain-core's fake chat models, and a
LangGraph retrieve -> generate graph. Nothing of LangChain is mocked."""

from __future__ import annotations

import math
import re
import zlib
from operator import itemgetter
from typing import Any, TypedDict

from groundtrace.record import Record
from groundtrace.score import Score
from groundtrace.sinks import Sink
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, StateGraph

CORPUS = [
    Document(id="en-paris", page_content="Paris is the capital of France.",
             metadata={"source": "france.md", "page": 1}),
    Document(id="en-eiffel", page_content="The Eiffel Tower in Paris was completed in 1889.",
             metadata={"source": "paris.md"}),
    Document(id="ru-moscow", page_content="Москва — столица России.",
             metadata={"source": "russia.md", "lang": "ru"}),
    Document(id="ru-baikal", page_content="Байкал — самое глубокое озеро в мире.",
             metadata={"source": "baikal.md", "lang": "ru"}),
]
BY_ID = {d.id: d for d in CORPUS}
GROUNDED_ANSWER = "Paris is the capital of France."
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    """Lowercased words of four letters or more: enough to match without a stopword list."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4}


class KeywordRetriever(BaseRetriever):
    """Documents sharing at least one word with the query, most shared words first."""

    documents: list[Document]
    k: int = 2

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        wanted = words(query)
        hits = [(len(wanted & words(d.page_content)), i, d) for i, d in enumerate(self.documents)]
        return [d for shared, _, d in sorted(hits, key=lambda h: (-h[0], h[1])) if shared][: self.k]


class BagOfWordsEmbeddings(Embeddings):
    """Hashed bag-of-words vectors (crc32, so stable across processes), L2-normalised."""

    dimensions = 256

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in words(text):
            vector[zlib.crc32(word.encode()) % self.dimensions] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class CollectingSink(Sink):
    """Keeps what the Monitor emits, so tests can read the Records and their Scores."""

    name = "collecting"

    def __init__(self) -> None:
        self.emitted: list[tuple[Record, list[Score]]] = []

    def emit(self, record: Record, scores: list[Score]) -> None:
        self.emitted.append((record, scores))

    @property
    def records(self) -> list[Record]:
        return [record for record, _ in self.emitted]

    def by_question(self) -> dict[str | None, Record]:
        return {record.question: record for record in self.records}


def format_documents(documents: list[Document]) -> str:
    return "\n".join(d.page_content for d in documents)


PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer from these passages only:\n{context}"),
    ("human", "{question}"),
])


def rag_chain(answer: str = GROUNDED_ANSWER, retriever: BaseRetriever | None = None, llm: Any = None) -> Runnable:
    """question (str) -> retriever -> prompt -> chat model -> str."""
    retriever = retriever or KeywordRetriever(documents=CORPUS, k=1)
    llm = llm or FakeListChatModel(responses=[answer])
    return (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )


def nested_chain(inner: Runnable, background: BaseRetriever) -> Runnable:
    """{'question'} -> a background retrieval, then a nested call of ``inner`` from a lambda."""
    return (
        RunnablePassthrough.assign(background=itemgetter("question") | background)
        | RunnableLambda(lambda state: inner.invoke(state["question"]), name="call_inner")
    )


class GraphState(TypedDict, total=False):
    question: str
    documents: list[Document]
    answer: str


def vector_retriever(k: int = 1) -> BaseRetriever:
    store = InMemoryVectorStore(embedding=BagOfWordsEmbeddings())
    store.add_documents(CORPUS)
    return store.as_retriever(search_kwargs={"k": k})


def rag_graph(answer: str = GROUNDED_ANSWER, answer_field: str = "answer", suffix: str = "") -> Any:
    """A LangGraph StateGraph: retrieve (a vector store) -> generate (a fake chat model). The state's
    ``answer_field`` gets the model's reply plus ``suffix``."""
    retriever = vector_retriever()
    llm = FakeListChatModel(responses=[answer])

    def retrieve(state: GraphState) -> dict[str, Any]:
        return {"documents": retriever.invoke(state["question"])}

    def generate(state: GraphState) -> dict[str, Any]:
        messages = PROMPT.invoke({"context": format_documents(state["documents"]), "question": state["question"]})
        return {answer_field: llm.invoke(messages).content + suffix}

    state_type = GraphState if answer_field == "answer" else TypedDict(  # type: ignore[misc]
        "CustomState", {"question": str, "documents": list[Document], answer_field: str}, total=False)
    graph = StateGraph(state_type)
    graph.add_node("retrieve", retrieve)
    graph.add_node("generate", generate)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()
