"""The demo's LangChain application: an LCEL RAG chain, retriever | prompt | chat model | parser,
over an in-memory vector store embedded with groundtrace's offline USE embedder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from groundtrace.backends.embedders import Embedder, get_embedder
from groundtrace_demo.data import TOP_K, Passage
from groundtrace_demo.llms import LLMChoice

PROMPT = ChatPromptTemplate.from_messages([
    ("system", ("You answer customers of Larkfield Home Goods. Use only these policy excerpts; if they do "
                "not contain the answer, say so.\n\n{context}")),
    ("human", "{question}"),
])
_ROLES = {"human": "user", "ai": "assistant", "system": "system"}


class UseEmbeddings(Embeddings):
    """groundtrace's default embedder (multilingual USE, CPU, offline) as LangChain Embeddings."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder or get_embedder("use")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0].tolist()


class ResponderChatModel(BaseChatModel):
    """A chat model whose replies come from a Responder: the replay of recorded answers, or a server."""

    responder: Any

    @property
    def _llm_type(self) -> str:
        return f"groundtrace-demo-{self.responder.kind}"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        text = self.responder.reply([{"role": _ROLES.get(m.type, "user"), "content": m.text} for m in messages])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def chat_model(choice: LLMChoice) -> BaseChatModel:
    if choice.kind == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=choice.model, base_url=choice.base_url, api_key=choice.api_key, temperature=0)
    return ResponderChatModel(responder=choice.responder)


def _format(documents: Sequence[Document]) -> str:
    return "\n\n".join(d.page_content for d in documents)


def build_chain(passages: Sequence[Passage], llm: BaseChatModel, k: int = TOP_K) -> Runnable:
    """question (str) -> answer (str)."""
    store = InMemoryVectorStore(embedding=UseEmbeddings())
    store.add_documents([Document(id=p.id, page_content=p.text, metadata={"source": p.source}) for p in passages])
    retriever = store.as_retriever(search_kwargs={"k": k})
    return (
        {"context": retriever | RunnableLambda(_format), "question": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )
