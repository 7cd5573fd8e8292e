"""Instrument a framework when the application imports it, and not before (``groundtrace-run``'s start-up hook).

``groundtrace-run`` resolves the installed integrations once and hands each process the pairs "framework module ->
instrument entry point" in ``GROUNDTRACE_INSTRUMENT_ON_IMPORT`` (``langchain_core=groundtrace_langchain:instrument``,
comma-separated; ``*=module:function`` for an integration that names no framework: instrumented at start). A finder
on ``sys.meta_path`` wraps the loader of each named module so that its integration's ``instrument()`` runs right
after the module's own code has run. A process that never imports a framework (a server's supervisor,
multiprocessing's resource tracker, a reloader) imports neither it nor groundtrace.

This module is imported by the ``sitecustomize`` at every interpreter start: it imports only what Python has
loaded already (``os``, ``sys``) and the built-in ``_thread``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported: it costs more than the rest of this module's start
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "GROUNDTRACE_INSTRUMENT_ON_IMPORT"
AT_START = "*"


def parse(value: str) -> list[tuple[str, str]]:
    """``module=target`` pairs from the variable's value (blanks and malformed items skipped)."""
    pairs = []
    for item in value.split(","):
        module, _, target = item.strip().partition("=")
        if module.strip() and ":" in target:
            pairs.append((module.strip(), target.strip()))
    return pairs


def call(target: str) -> Any:
    """Import ``module:function`` and call it."""
    module_name, _, attribute = target.partition(":")
    __import__(module_name)
    found: Any = sys.modules[module_name]
    for part in attribute.split("."):
        found = getattr(found, part)
    return found()


def _warn(framework: str, target: str, error: BaseException) -> None:
    """A failed instrument() is said, and the application goes on (its import must not fail because of us)."""
    text = f"groundtrace: could not instrument {framework} ({target}): {type(error).__name__}: {error}"
    try:
        from groundtrace.redaction import get_logger  # redacted like every groundtrace warning

        get_logger("groundtrace.monitor.autoinstrument").warning("%s", text)
    except Exception:
        sys.stderr.write(text + "\n")


def instrument(framework: str, target: str) -> None:
    try:
        call(target)
    except Exception as error:
        _warn(framework, target, error)


class _Instrumenting:
    """The framework's own loader, which runs the integration's instrument() once the module has executed."""

    def __init__(self, loader: Any, finder: InstrumentOnImport) -> None:
        self.loader, self.finder = loader, finder

    def create_module(self, spec: Any) -> Any:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        # the module keeps its own loader (pkgutil, importlib.resources and reloads look at it), not this wrapper
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.finder.loaded(module.__name__)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, get_resource_reader ...
        return getattr(self.loader, name)


class InstrumentOnImport:
    """A ``sys.meta_path`` finder for the frameworks in ``waiting`` (module -> ``module:function``) and for their
    integrations' modules: it finds nothing itself; it wraps the loader the other finders find, so that once one
    of these modules has executed, each framework imported by then is instrumented. Each target runs once; a
    framework whose import fails stays waiting for the next attempt; an integration that imports its framework
    itself (``import groundtrace_langchain`` first) is called once its own import has ended."""

    def __init__(self, waiting: dict[str, str]) -> None:
        import _thread  # built in: threading would cost more than the rest of this module's start

        self._waiting = dict(waiting)
        self._watched = set(waiting) | {target.partition(":")[0] for target in waiting.values()}
        self._lock = _thread.allocate_lock()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self._watched:  # every import of the process passes here: one set lookup
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Instrumenting(spec.loader, self)
                return spec
        return None

    def loaded(self, name: str) -> None:
        """``name`` has executed: instrument each framework that is imported now, unless its integration is still
        being imported (it imports the framework itself): then at the end of that import, which is watched too."""
        with self._lock:  # once, whichever thread imports it
            ready = [(framework, target) for framework, target in self._waiting.items()
                     if _imported(framework, name) and not _importing(target.partition(":")[0], name)]
            for framework, _ in ready:
                del self._waiting[framework]
        for framework, target in ready:
            instrument(framework, target)

    @property
    def waiting(self) -> list[str]:
        return list(self._waiting)


def _importing(module: str, done: str) -> bool:
    """Whether ``module`` is being imported right now (its code has not finished running); ``done`` just has."""
    found = sys.modules.get(module)
    return module != done and found is not None and bool(getattr(getattr(found, "__spec__", None), "_initializing",
                                                                 False))


def _imported(module: str, done: str = "") -> bool:
    return module == done or (module in sys.modules and not _importing(module, done))


def install(pairs: list[tuple[str, str]]) -> InstrumentOnImport | None:
    """Instrument at once what is ``*`` and what is imported already; wait on ``sys.meta_path`` for the rest."""
    waiting: dict[str, str] = {}
    for module, target in pairs:
        if module == AT_START or _imported(module):
            instrument(module, target)
        else:
            waiting.setdefault(module, target)
    if not waiting:
        return None
    finder = InstrumentOnImport(waiting)
    sys.meta_path.insert(0, finder)
    return finder


def install_from_environment() -> bool:
    """What ``sitecustomize`` calls. False when the variable is absent (an older launcher: the caller instruments
    every integration at once, as before)."""
    value = os.environ.get(VARIABLE)
    if value is None:
        return False
    # GROUNDTRACE_ENABLED is not read here (groundtrace.config is its one reader): an integration's instrument()
    # does nothing when it is off, and the scoring process starts without this folder on its path
    install(parse(value))
    return True
