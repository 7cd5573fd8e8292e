"""A request's capture state ends with the request: what a ``@groundtrace.retrieval`` left waiting for a model
call (a request that retrieved and then refused) is dropped when the request ends, so the next request served by
the same pooled thread (gunicorn's gthread, a ThreadPoolExecutor, Django's WSGI threads) never pairs it with
its own model call.

- :func:`request_scope`: a context manager for any boundary you have (a task queue's job, a handler of your own);
- :class:`ASGIMiddleware`: Starlette, FastAPI, any ASGI app (``app.add_middleware(ASGIMiddleware)``, or wrap it);
- :class:`WSGIMiddleware`: Flask (``app.wsgi_app = WSGIMiddleware(app.wsgi_app)``), Django
  (``application = WSGIMiddleware(get_wsgi_application())``), any WSGI app.

Without them the capture still keeps requests apart by what reached the model (a model call is paired only with
passages its input holds), by the OpenTelemetry trace where a server span is current, and by a short lifetime
(:data:`groundtrace.capture.marked.PENDING_TTL_S`). They add a few microseconds per request; they never raise into
the application and never change what it returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from groundtrace.capture.marked import PENDING, count_failure, drop_pending, log


@contextlib.contextmanager
def request_scope() -> Iterator[None]:
    """One request: it starts with nothing waiting from an earlier one, and leaves nothing behind."""
    token = _begin()
    try:
        yield
    finally:
        _end(token)


def _begin() -> Any:
    try:
        left = drop_pending()
        if left:
            log.debug("groundtrace: %d retrieval(s) of an earlier request that no model call took, dropped", left)
        return PENDING.set(())
    except Exception:
        count_failure("a request scope (start)")
        return None


def _end(token: Any) -> None:
    try:
        left = drop_pending()
        if left:
            log.debug("groundtrace: the request ended with %d retrieval(s) no model call took (not a turn)", left)
        if token is not None:
            PENDING.reset(token)
    except ValueError:  # ended in another context than it began: the request's own is gone with it
        pass
    except Exception:
        count_failure("a request scope (end)")


class ASGIMiddleware:
    """Each HTTP or WebSocket request in a :func:`request_scope` (lifespan events pass through untouched)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        token = _begin()
        try:
            await self.app(scope, receive, send)
        finally:
            _end(token)


class WSGIMiddleware:
    """Each request in a :func:`request_scope` until the server closes its response (a streamed body is read
    after the application returns: the scope lasts until then). A body made by the server's ``wsgi.file_wrapper``
    (Flask's ``send_file``) is returned as it is, only its ``close`` extended, so the server still sends it with
    ``sendfile``."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        token = _begin()
        try:
            body: Iterable[bytes] = self.app(environ, start_response)
        except BaseException:
            _end(token)
            raise
        wrapper = environ.get("wsgi.file_wrapper")
        if isinstance(wrapper, type) and isinstance(body, wrapper) and _end_on_close(body, token):
            return body  # the server's own file wrapper, as it gave it: sent with sendfile only if it is one
        return _Closing(body, token)


def _end_on_close(body: Any, token: Any) -> bool:
    """The scope ends when the server closes ``body``, its iteration untouched (False: it takes no attribute)."""
    def closing() -> None:
        try:
            if close is not None:
                close()
        finally:
            _end(token)

    try:
        close = getattr(body, "close", None)
        body.close = closing
    except Exception:  # __slots__, a read-only close: the plain wrapper, without sendfile
        return False
    return True


class _Closing:
    """A WSGI body that ends the request scope when the server closes it (PEP 3333), passing everything through."""

    def __init__(self, body: Iterable[bytes], token: Any) -> None:
        self.body, self.token = body, token

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            _end(self.token)

    def __getattr__(self, name: str) -> Any:  # a server's fast path (wsgi.file_wrapper's filelike) still finds it
        return getattr(self.body, name)
