"""The demo's LlamaIndex application: a VectorStoreIndex query engine over the passages, embedded
with groundtrace's offline USE embedder, answering through a completion LLM."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from llama_index.core import PromptTemplate, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM, CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import BaseQueryEngine
from llama_index.core.schema import TextNode
from pydantic import PrivateAttr

from groundtrace.backends.embedders import Embedder, get_embedder
from groundtrace_demo.data import TOP_K, Passage
from groundtrace_demo.llms import LLMChoice

# The engine answers the Russian student-services questions, so its prompt is Russian too: a real
# LLM then answers in the question's language.
QA_PROMPT = PromptTemplate(
    "Ниже — выдержки из ответов на частые вопросы студентов СДГУ.\n"
    "---------------------\n{context_str}\n---------------------\n"
    "Ответь на вопрос, опираясь только на эти выдержки. Если в них нет ответа, так и скажи.\n"
    "Вопрос: {query_str}\nОтвет: "
)


class UseEmbedding(BaseEmbedding):
    """groundtrace's default embedder (multilingual USE, CPU, offline) as a LlamaIndex embedding."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder | None = None, **kwargs: Any) -> None:
        super().__init__(model_name="groundtrace-use", **kwargs)
        self._embedder = embedder or get_embedder("use")

    @classmethod
    def class_name(cls) -> str:
        return "GroundtraceUseEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class ResponderLLM(CustomLLM):
    """A completion LLM whose replies come from a Responder: the replay of recorded answers, or a server."""

    responder: Any

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=f"groundtrace-demo-{self.responder.kind}")

    def _reply(self, prompt: str) -> str:
        return self.responder.reply([{"role": "user", "content": prompt}])

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._reply(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Iterator[CompletionResponse]:
        text = self._reply(prompt)

        def chunks() -> Iterator[CompletionResponse]:  # the whole reply as one chunk
            yield CompletionResponse(text=text, delta=text)

        return chunks()


def llm(choice: LLMChoice) -> LLM:
    if choice.kind == "openai":
        from llama_index.llms.openai_like import OpenAILike

        return OpenAILike(model=choice.model, api_base=choice.base_url or "https://api.openai.com/v1",
                          api_key=choice.api_key or "not-needed", is_chat_model=True,
                          temperature=0)
    return ResponderLLM(responder=choice.responder)


def build_query_engine(passages: Sequence[Passage], answerer: LLM, k: int = TOP_K) -> BaseQueryEngine:
    """engine.query(question) -> Response; one node per passage, so retrieval matches the LangChain side."""
    nodes = [TextNode(id_=p.id, text=p.text, metadata={"source": p.source},
                      excluded_embed_metadata_keys=["source"], excluded_llm_metadata_keys=["source"])
             for p in passages]
    index = VectorStoreIndex(nodes, embed_model=UseEmbedding())
    return index.as_query_engine(llm=answerer, similarity_top_k=k, text_qa_template=QA_PROMPT)
