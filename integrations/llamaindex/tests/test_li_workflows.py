"""Hand-written Workflows: the run is one turn; its question is the StartEvent's, its answer the
StopEvent's result (a string, a Response, a stream read to its end), its contexts what the model
call that wrote that answer read. Here: retrieve 4, rerank to 2 with a real LLMRerank (whose own
model call read all 4), then answer from the 2."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import KeywordEmbedding, build_keyword_index
from li_support import ANSWER, CITY_EN, CITY_RU, DORM_EN, DORM_RU, ScriptedLLM, assert_nothing_left, stream_tokens
from llama_index.core import get_response_synthesizer
from llama_index.core.base.response.schema import AsyncStreamingResponse
from llama_index.core.postprocessor import LLMRerank
from llama_index.core.schema import NodeWithScore
from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step

QUESTION_EN = "What is the dormitory fee in rubles?"
# LLMRerank's answer: documents 1 and 3 of the four retrieved (dorm-en, city-ru, dorm-ru, city-en)
RANKING = "Doc: 1, Relevance: 9\nDoc: 3, Relevance: 8"
KEPT = [DORM_EN, DORM_RU]
DROPPED = [{"kind": "document", "id": "city-ru#0"}, {"kind": "document", "id": "city-en#0"}]
# the reranker's scores replace the retriever's in the metadata
KEPT_NODES = [
    {"id": "dorm-en#0", "score": 9.0, "metadata": {"lang": "en", "source": "spbu.ru/en/dorm"}},
    {"id": "dorm-ru#0", "score": 8.0, "metadata": {"lang": "ru", "source": "spbu.ru/dorm"}},
]


class AskEvent(StartEvent):
    question: str


class Retrieved(Event):
    question: str
    nodes: list[NodeWithScore]


class Reranked(Event):
    question: str
    nodes: list[NodeWithScore]


class Progress(Event):
    stage: str


class RerankThenAnswer(Workflow):
    """``answer_with``: "prompt" (the workflow writes its own prompt and returns the text), or a
    response synthesizer's mode ("compact", "refine"), which returns a Response; ``streaming``: the
    synthesizer's response is a stream the caller reads after the run."""

    def __init__(self, index, llm, answer_with: str = "prompt", streaming: bool = False) -> None:
        super().__init__(timeout=30)
        self.retriever = index.as_retriever(similarity_top_k=4, embed_model=KeywordEmbedding())
        self.reranker = LLMRerank(llm=llm, top_n=2)
        self.llm, self.answer_with = llm, answer_with
        self.synthesizer = None if answer_with == "prompt" else get_response_synthesizer(
            llm=llm, response_mode=answer_with, streaming=streaming)

    @step
    async def retrieve(self, ctx: Context, ev: AskEvent) -> Retrieved:
        ctx.write_event_to_stream(Progress(stage="retrieve"))
        return Retrieved(question=ev.question, nodes=await self.retriever.aretrieve(ev.question))

    @step
    def rerank(self, ev: Retrieved) -> Reranked:  # a plain function: LlamaIndex runs it in a thread
        return Reranked(question=ev.question, nodes=self.reranker.postprocess_nodes(ev.nodes, query_str=ev.question))

    @step
    async def answer(self, ctx: Context, ev: Reranked) -> StopEvent:
        ctx.write_event_to_stream(Progress(stage="answer"))
        if self.synthesizer is not None:
            return StopEvent(result=await self.synthesizer.asynthesize(ev.question, ev.nodes))
        context = "\n\n".join(node.node.get_content() for node in ev.nodes)
        reply = await self.llm.acomplete(f"Context:\n{context}\n\nQuery: {ev.question}\nAnswer:")
        return StopEvent(result=reply.text)


def rag_llm() -> ScriptedLLM:
    return ScriptedLLM(routes={"relevance score": RANKING})


def run(workflow: Workflow, question: str = QUESTION_EN):
    async def go():
        return await workflow.run(start_event=AskEvent(question=question))

    return asyncio.run(go())


@pytest.fixture(scope="module")
def keyword_index():
    return build_keyword_index()


def assert_rag_record(record) -> None:
    assert record.id.startswith("RerankThenAnswer.run-")
    assert (record.question, record.answer, record.contexts) == (QUESTION_EN, ANSWER, KEPT)
    assert record.metadata == {"nodes": KEPT_NODES, "unused_contexts": DROPPED}


def test_a_workflow_that_reranks_keeps_only_what_its_answer_was_written_from(keyword_index, instrumented, sink):
    assert run(RerankThenAnswer(keyword_index, rag_llm())) == ANSWER

    assert instrumented.flush(10)
    [record] = sink.records
    assert_rag_record(record)
    assert record.queries is None  # the retriever was given the question itself
    assert_nothing_left()


@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_a_workflow_that_returns_a_synthesizers_response(keyword_index, instrumented, sink, mode):
    """refine reads one node per model call: the Response's source nodes say what it read in all."""
    result = run(RerankThenAnswer(keyword_index, rag_llm(), answer_with=mode))

    assert str(result) == ANSWER
    assert instrumented.flush(10)
    [record] = sink.records
    assert_rag_record(record)
    assert_nothing_left()


def test_a_workflow_read_through_stream_events_then_awaited(keyword_index, instrumented, sink):
    async def go() -> tuple[list[str], str]:
        handler = RerankThenAnswer(keyword_index, rag_llm()).run(start_event=AskEvent(question=QUESTION_EN))
        stages = [event.stage async for event in handler.stream_events() if isinstance(event, Progress)]
        return stages, await handler

    stages, answer = asyncio.run(go())

    assert (stages, answer) == (["retrieve", "answer"], ANSWER)
    assert instrumented.flush(10)
    [record] = sink.records
    assert_rag_record(record)
    assert_nothing_left()


def test_a_workflow_whose_result_is_a_stream_is_recorded_when_the_stream_is_read(keyword_index, instrumented, sink):
    workflow = RerankThenAnswer(keyword_index, rag_llm(), answer_with="compact", streaming=True)

    async def go() -> list[str]:
        response = await workflow.run(start_event=AskEvent(question=QUESTION_EN))
        assert isinstance(response, AsyncStreamingResponse)
        assert instrumented.flush(10) and sink.records == []  # the answer does not exist yet
        return [token async for token in response.async_response_gen()]

    assert asyncio.run(go()) == stream_tokens()
    assert instrumented.flush(10)
    [record] = sink.records
    assert_rag_record(record)
    assert_nothing_left()


def test_the_workflows_runs_are_turns_of_their_own(keyword_index, instrumented, sink):
    workflow = RerankThenAnswer(keyword_index, rag_llm())

    async def two_at_once() -> list[str]:
        return list(await asyncio.gather(workflow.run(start_event=AskEvent(question=QUESTION_EN)),
                                         workflow.run(start_event=AskEvent(question="Dormitory fee per month?"))))

    assert asyncio.run(two_at_once()) == [ANSWER, ANSWER]

    assert instrumented.flush(10)
    assert sorted(record.question for record in sink.records) == ["Dormitory fee per month?", QUESTION_EN]
    assert all(record.contexts == KEPT for record in sink.records)
    assert CITY_EN not in sink.records[0].contexts and CITY_RU not in sink.records[1].contexts
    assert_nothing_left()
