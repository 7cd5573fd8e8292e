"""Many invocations at once, on threads and on an event loop: each Record is its own, no cross-talk."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from groundtrace_langchain import instrument
from lc_app import CollectingSink, KeywordRetriever, format_documents

N = 50


def tag(i: int) -> str:
    return f"p{i:02d}q"


def parcel(i: int) -> Document:
    # every English document shares "parcel" and every Russian one "посылка"/"отправляется" with
    # every query of its language; only the tag makes the right one rank first
    if i % 2:
        return Document(page_content=f"Посылка {tag(i)} отправляется со склада номер {i}.", id=f"doc-{i}")
    return Document(page_content=f"Parcel {tag(i)} ships from depot number {i}.", id=f"doc-{i}")


def question(i: int) -> str:
    return f"Откуда отправляется посылка {tag(i)}?" if i % 2 else f"Where does parcel {tag(i)} ship from?"


CORPUS = [parcel(i) for i in range(N)]
# the parrot model answers with the last message it got: an answer unique to each question
ECHO_PROMPT = ChatPromptTemplate.from_messages([("human", "Context: {context}\nQuestion: {question}")])


def expected_answer(i: int) -> str:
    return f"Context: {CORPUS[i].page_content}\nQuestion: {question(i)}"


def echo_chain():
    retriever = KeywordRetriever(documents=CORPUS, k=1)
    return (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | ECHO_PROMPT
        | ParrotFakeChatModel()
        | StrOutputParser()
    )


def assert_each_record_is_its_own(sink: CollectingSink, answers: dict[int, str]) -> None:
    assert answers == {i: expected_answer(i) for i in range(N)}  # what the application got back
    records = sink.by_question()
    assert len(sink.records) == N == len(records)
    for i in range(N):
        record = records[question(i)]
        assert record.contexts == [CORPUS[i].page_content]
        assert record.answer == expected_answer(i)
        assert record.metadata["documents"] == [{"id": f"doc-{i}", "source": None, "metadata": {}}]
    assert len({r.run_id for r in sink.records}) == N
    # the lexical score came back for every one
    assert all(scores[0].metric == "lexical" and scores[0].value is not None for _, scores in sink.emitted)


def test_50_concurrent_invocations_on_threads(handler, monitor, sink):
    chain = echo_chain()
    start_together = threading.Barrier(N)

    def ask(i: int) -> tuple[int, str]:
        start_together.wait()
        return i, chain.invoke(question(i), config={"callbacks": [handler]})

    with ThreadPoolExecutor(max_workers=N) as pool:
        answers = dict(pool.map(ask, range(N)))

    assert monitor.flush(10)
    assert_each_record_is_its_own(sink, answers)
    assert monitor.stats.scored == N


def test_50_concurrent_invocations_on_an_event_loop(handler, monitor, sink):
    chain = echo_chain()

    async def ask_all() -> list[str]:
        return await asyncio.gather(*(chain.ainvoke(question(i), config={"callbacks": [handler]}) for i in range(N)))

    answers = dict(enumerate(asyncio.run(ask_all())))

    assert monitor.flush(10)
    assert_each_record_is_its_own(sink, answers)


def test_instrument_captures_runs_on_plain_threads_started_later(monitor, sink):
    instrument(monitor=monitor)
    chain = echo_chain()
    answers: dict[int, str] = {}

    def ask(i: int) -> None:  # a bare thread starts with an empty context: no inherited config
        answers[i] = chain.invoke(question(i))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(N)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert monitor.flush(10)
    assert_each_record_is_its_own(sink, answers)
