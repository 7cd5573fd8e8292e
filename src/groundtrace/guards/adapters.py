"""Which integration guards a framework's object: ``Guard.wrap(target)`` looks up the ``groundtrace.guards`` entry
points (a module prefix = a ``wrap(guard, target, **options)`` function), so that the core imports no framework."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

Wrapper = Callable[..., Any]
HINT = ("install the integration for its framework: pip install 'groundtrace-langchain' (LangChain, LangGraph) or "
        "'groundtrace-llamaindex' (LlamaIndex); plain code calls guard.check / guard.stream")


def wrapper_for(target: Any) -> Wrapper:
    """The installed integration's wrap function for ``target``'s framework (by the modules of its classes)."""
    found = {point.name: point for point in entry_points(group="groundtrace.guards")}
    for cls in type(target).__mro__:
        module = cls.__module__ or ""
        for prefix in sorted(found, key=len, reverse=True):
            if module == prefix or module.startswith(prefix + "."):
                wrap: Wrapper = found[prefix].load()
                return wrap
    raise TypeError(f"groundtrace guard: cannot wrap a {type(target).__module__}.{type(target).__qualname__}: {HINT}")
