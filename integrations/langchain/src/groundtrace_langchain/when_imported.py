"""Run a function right after a module has been imported, by whoever imports it.

instrument() registers LangChain's configure hook in ``langchain_core.tracers.context``, which loads langsmith (a
third of a second). LangChain itself imports that module only when it configures its first run, and reads the
hooks just after: registering then costs the application's start-up nothing, and the first run is captured.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from groundtrace.redaction import get_logger

log = get_logger("groundtrace.langchain")


class _ThenLoader:
    """The module's own loader, which runs ``then`` once the module's code has run."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own loader
        self.loader.exec_module(module)
        try:
            self.then()
        except Exception as error:  # the application's import goes on: capture is what is lost, and said
            log.warning("groundtrace: LangChain runs are not captured: %s: %s", type(error).__name__, error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class _WhenImported:
    """A ``sys.meta_path`` finder that finds nothing itself: it wraps the loader found for ``name``, once."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then
        self._lock = threading.Lock()
        self._done = False  # it stays on sys.meta_path (a finder removed while the import system walks it skips the
        # next one): one string comparison per import

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self._done:
            return None
        with self._lock:
            if self._done:
                return None
            self._done = True  # once: a failed import is not retried here
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec: Any = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenLoader(spec.loader, self.then)
                return spec
        return None


def when_imported(name: str, then: Callable[[], None]) -> None:
    """Call ``then`` right after ``name`` is imported (now, if it is already)."""
    if name in sys.modules:
        then()
        return
    sys.meta_path.insert(0, _WhenImported(name, then))
