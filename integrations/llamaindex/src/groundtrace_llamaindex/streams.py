"""Token streams that say how they ended.

A streaming query returns before its answer exists: the LLM is only called while the caller reads
the stream. These wrappers pass every token through unchanged and, once, call ``on_end`` with the
whole text when the stream was read to its end, or with None when it raised or was closed early.
A stream that is never started never calls back; it is simply collected with what it holds.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator


def follow_tokens(tokens: Iterator[str], on_end: Callable[[str | None], None]) -> Generator[str, None, None]:
    parts: list[str] = []
    complete = False
    try:
        for token in tokens:
            parts.append(str(token))
            yield token
        complete = True
    finally:
        on_end("".join(parts) if complete else None)


async def follow_async_tokens(tokens: AsyncIterator[str], on_end: Callable[[str | None], None]) -> AsyncGenerator[str, None]:
    parts: list[str] = []
    complete = False
    try:
        async for token in tokens:
            parts.append(str(token))
            yield token
        complete = True
    finally:
        on_end("".join(parts) if complete else None)
