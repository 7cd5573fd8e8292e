"""Every Record knows its conversation (issue 30): record.session_id is the id LlamaIndex's own memory
keeps it under (a Memory's session_id, a ChatMemoryBuffer's chat_store_key), read at the root's
start from an agent's run or a chat engine; else the one the app gave groundtrace.session(...)."""

from __future__ import annotations

import asyncio

from agent_support import searching_agent
from groundtrace.capture.session import session
from li_support import QUESTION, TOP_K, ScriptedLLM, assert_nothing_left
from llama_index.core.memory import ChatMemoryBuffer, Memory


def records(monitor, sink, count: int):
    assert monitor.flush(10)
    assert len(sink.records) == count
    assert_nothing_left()
    return sink.records


def test_an_agents_memory_names_the_conversation_of_every_turn(index, instrumented, sink):
    agent = searching_agent(index, "first answer", "second answer")

    async def two_turns() -> None:
        memory = Memory.from_defaults(session_id="student-42")
        await agent.run(user_msg="How much is the dormitory?", memory=memory)
        await agent.run(user_msg="And per year?", memory=memory)

    asyncio.run(two_turns())

    first, second = records(instrumented, sink, 2)
    assert [(r.answer, r.session_id) for r in (first, second)] == [("first answer", "student-42"),
                                                                   ("second answer", "student-42")]


def test_a_chat_memory_buffers_key_is_the_conversation_and_wins_over_the_apps(index, instrumented, sink):
    agent = searching_agent(index)

    async def go() -> None:
        with session("from-the-app"):  # the framework's own id wins
            await agent.run(user_msg="How much?", memory=ChatMemoryBuffer.from_defaults(chat_store_key="student-7"))

    asyncio.run(go())

    [record] = records(instrumented, sink, 1)
    assert record.session_id == "student-7"


def test_the_default_buffer_key_names_no_conversation_but_the_apps_session_does(index, instrumented, sink):
    """Every ChatMemoryBuffer shares the key "chat_history": it says nothing of whose turn it is."""
    async def go() -> None:
        await searching_agent(index).run(user_msg="How much?", memory=ChatMemoryBuffer.from_defaults())
        with session("conversation-9"):
            await searching_agent(index).run(user_msg="How much now?")

    asyncio.run(go())

    plain, given = records(instrumented, sink, 2)
    assert (plain.session_id, given.session_id) == (None, "conversation-9")


def test_a_chat_engines_memory_names_the_conversation(index, instrumented, sink):
    memory = ChatMemoryBuffer.from_defaults(chat_store_key="student-3")
    engine = index.as_chat_engine(chat_mode="context", llm=ScriptedLLM(), similarity_top_k=TOP_K, memory=memory)

    engine.chat(QUESTION)
    with session("ignored"):
        engine.chat(QUESTION)

    assert [r.session_id for r in records(instrumented, sink, 2)] == ["student-3", "student-3"]


def test_a_query_engine_has_the_apps_session_and_none_outside_it(index, instrumented, sink):
    engine = index.as_query_engine(llm=ScriptedLLM(), similarity_top_k=TOP_K)

    with session("conversation-1"):
        engine.query(QUESTION)
    engine.query(QUESTION)

    assert [r.session_id for r in records(instrumented, sink, 2)] == ["conversation-1", None]


def test_session_sets_and_restores_the_current_conversation():
    from groundtrace.capture.session import current_session

    assert current_session() is None
    with session("outer"):
        with session("inner"):
            assert current_session() == "inner"
        assert current_session() == "outer"
    assert current_session() is None
