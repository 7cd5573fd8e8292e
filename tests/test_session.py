"""groundtrace.capture.session: the user-given conversation id, as contextvars carry it."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import uuid

import pytest

import groundtrace
from groundtrace.capture.session import current_session, session


def test_outside_any_block_there_is_no_session() -> None:
    assert current_session() is None


def test_a_block_names_the_session_and_nested_blocks_restore_the_outer_one() -> None:
    with groundtrace.session("chat-1") as outer:
        assert (outer, current_session()) == ("chat-1", "chat-1")
        with session("chat-2"):
            assert current_session() == "chat-2"
        assert current_session() == "chat-1"
    assert current_session() is None


def test_the_session_is_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), session("chat-1"):
        raise RuntimeError("the app failed")
    assert current_session() is None


def test_a_non_string_id_is_kept_as_its_text() -> None:
    chat = uuid.UUID("12345678-1234-5678-1234-567812345678")
    with session(chat):  # type: ignore[arg-type]
        assert current_session() == "12345678-1234-5678-1234-567812345678"
    with session(42):  # type: ignore[arg-type]
        assert current_session() == "42"


def test_an_empty_id_is_refused_and_sets_nothing() -> None:
    with pytest.raises(ValueError, match="must not be empty"), session(""):
        pass
    assert current_session() is None


def test_each_asyncio_task_keeps_the_session_it_was_started_under() -> None:
    async def turn(name: str) -> tuple[str | None, str | None]:
        with session(name):
            await asyncio.sleep(0)  # the other task runs its block meanwhile
            inner = current_session()
        return inner, current_session()

    async def main() -> list[tuple[str | None, str | None]]:
        with session("outer"):
            child = asyncio.create_task(asyncio.sleep(0, result=current_session()))
            pair = await asyncio.gather(turn("a"), turn("b"))
            return [*pair, (await child, current_session())]

    assert asyncio.run(main()) == [("a", "outer"), ("b", "outer"), ("outer", "outer")]


def test_a_thread_sees_the_session_when_run_in_a_copy_of_the_context_and_a_bare_thread_does_not() -> None:
    seen: dict[str, str | None] = {}
    with session("chat-7"):
        context = contextvars.copy_context()
        copied = threading.Thread(target=context.run, args=(lambda: seen.update(copied=current_session()),))
        bare = threading.Thread(target=lambda: seen.update(bare=current_session()))
        for thread in (copied, bare):
            thread.start()
            thread.join()
    assert seen == {"copied": "chat-7", "bare": None}
