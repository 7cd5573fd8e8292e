"""The two handlers LlamaIndex's instrumentation dispatcher calls; both hand everything to a
RootTracker and swallow any failure of their own, counted in stats().callback_errors (LlamaIndex's
dispatcher swallows them too, but a handler should not count on it)."""

from __future__ import annotations

import inspect
from typing import Any


from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from pydantic import Field

from groundtrace_llamaindex.events import parent_key, span_key, tag_dict
from groundtrace_llamaindex.tracker import EVENT_READERS, RootTracker



def _cannot_read(tracker: RootTracker | None, event: str, span_id: Any, parent_id: Any = None) -> None:
    try:
        if tracker is not None:
            tracker.cannot_read(event, span_id, parent_id)
    except Exception:
        pass


class GroundtraceSpanHandler(BaseSpanHandler[BaseSpan]):
    """Tells the tracker where each span starts and how it ends (result, or the error it raised).

    The tracker keeps its own record of open spans, so LlamaIndex's ``open_spans`` stays empty:
    filling it takes the base class's lock, read through a pydantic private attribute, on every
    span's start and end (~15 µs a span, most of what this handler cost per request before).
    Dispatcher.shutdown() therefore finds no span of ours to drop; it calls ``close()``, which
    stops the tracker and forgets every open root.
    """

    # a field, not a private attribute: pydantic serves those through __getattr__, ~4 µs a call.
    # None only until __init__ sets it: BaseSpanHandler.__init__ passes on no extra fields.
    tracker: RootTracker | None = Field(default=None, exclude=True)

    def __init__(self, tracker: RootTracker) -> None:
        super().__init__()
        self.tracker = tracker

    @classmethod
    def class_name(cls) -> str:
        return "GroundtraceSpanHandler"

    # The dispatcher calls span_enter / span_exit / span_drop; the base class's versions look the
    # span up in open_spans (a pydantic field) and pass on by keyword to new_span & co. These go
    # straight to the tracker: one call less per span start and end, on every span of every request.
    def span_enter(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None,
                   parent_id: str | None = None, tags: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            if self.tracker is not None:  # set by __init__
                self.tracker.span_started(span_key(id_), parent_key(parent_id), bound_args.arguments, tag_dict(tags),
                                          instance)
        except Exception:
            _cannot_read(self.tracker, "span start", id_, parent_id)

    def span_exit(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None, result: Any = None,
                  **kwargs: Any) -> None:
        try:
            if self.tracker is not None:
                self.tracker.span_exited(span_key(id_), instance, result)
        except Exception:
            _cannot_read(self.tracker, "span exit", id_)

    def span_drop(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None,
                  err: BaseException | None = None, **kwargs: Any) -> None:
        try:
            if self.tracker is not None:
                self.tracker.span_dropped(span_key(id_), instance, err)
        except Exception:
            _cannot_read(self.tracker, "span drop", id_)

    # BaseSpanHandler's abstract methods, for anyone who calls them directly (the dispatcher does not)
    def new_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None,
                 parent_span_id: str | None = None, tags: dict[str, Any] | None = None,
                 **kwargs: Any) -> BaseSpan | None:
        self.span_enter(id_, bound_args, instance, parent_span_id, tags)
        return None

    def prepare_to_exit_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None,
                             result: Any = None, **kwargs: Any) -> BaseSpan | None:
        self.span_exit(id_, bound_args, instance, result)
        return None

    def prepare_to_drop_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Any = None,
                             err: BaseException | None = None, **kwargs: Any) -> BaseSpan | None:
        self.span_drop(id_, bound_args, instance, err)
        return None

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.close()


class GroundtraceEventHandler(BaseEventHandler):
    """Passes the events that carry a question, nodes or an answer to the tracker: ``GroundtraceEventHandler(tracker=...)``."""

    tracker: RootTracker = Field(exclude=True)

    @classmethod
    def class_name(cls) -> str:
        return "GroundtraceEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        read = EVENT_READERS.get(type(event))
        if read is None:  # most events carry nothing for the Record: ignored at one dict lookup
            return
        try:
            self.tracker.on_event(event, read)
        except Exception:
            _cannot_read(self.tracker, type(event).__name__, getattr(event, "span_id", None))
