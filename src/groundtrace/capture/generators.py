"""Decorated generators that behave exactly as undecorated ones: every value yielded passes through, ``send``,
``throw`` and ``close`` (``asend``, ``athrow``, ``aclose``) reach the function, its return value is the
wrapper's (``yield from`` sees it), and the wrapper is a generator function itself (frameworks that look
with ``inspect.isgeneratorfunction`` see what they saw).

:class:`Watch` is what a decorator learns: ``begin`` when the generator is created (it may give a
:class:`contextvars.Context`: every step then runs in it, so what the decorator sets there, such as the turn
the code belongs to, stays there: two generators consumed in turns on one thread never see each other's, and
nothing stays set in the caller's context), ``seen`` for each item, ``end`` once: when the function returned,
raised, or was closed before its end. Hooks must not raise (the decorators guard them).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any, Generic, TypeVar

State = TypeVar("State")


class Watch(Generic[State]):
    def begin(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[State, contextvars.Context | None]:
        raise NotImplementedError

    def seen(self, state: State, item: Any) -> None:
        """An item the generator yielded."""

    def end(self, state: State, error: BaseException | None, closed: bool) -> None:
        """It returned (``error`` None), raised ``error``, or was closed early (``closed``)."""


def wrap_generator(function: Callable[..., Generator[Any, Any, Any]], watch: Watch[Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        state, context = watch.begin(args, kwargs)
        run = context.run if context is not None else _call
        try:
            inner = run(function, *args, **kwargs)
        except BaseException as error:  # raised before it was a generator (a wrapped callable's own check)
            watch.end(state, error, False)
            raise
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                item = run(inner.throw, thrown) if thrown is not None else run(inner.send, sent)
            except StopIteration as stop:
                watch.end(state, None, False)
                return stop.value
            except BaseException as error:
                watch.end(state, error, False)
                raise
            thrown = None
            watch.seen(state, item)
            try:
                sent = yield item
            except GeneratorExit:
                try:
                    run(inner.close)
                finally:
                    watch.end(state, None, True)
                raise
            except BaseException as error:  # thrown in by the caller: the function handles it, or not
                thrown, sent = error, None

    return wrapper


def wrap_async_generator(function: Callable[..., AsyncGenerator[Any, Any]], watch: Watch[Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        state, context = watch.begin(args, kwargs)

        async def step(awaitable: Any) -> Any:
            # asyncio runs a coroutine in another context only as a task of its own; cancelling us cancels it
            return await (asyncio.create_task(awaitable, context=context) if context is not None else awaitable)

        try:
            inner = context.run(function, *args, **kwargs) if context is not None else function(*args, **kwargs)
        except BaseException as error:
            watch.end(state, error, False)
            raise
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                item = await step(inner.athrow(thrown) if thrown is not None else inner.asend(sent))
            except StopAsyncIteration:
                watch.end(state, None, False)
                return
            except BaseException as error:
                watch.end(state, error, False)
                raise
            thrown = None
            watch.seen(state, item)
            try:
                sent = yield item
            except GeneratorExit:
                try:
                    await step(inner.aclose())
                finally:
                    watch.end(state, None, True)
                raise
            except BaseException as error:
                thrown, sent = error, None

    return wrapper


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)
