"""groundtrace-run's import hook, in this process: a framework's integration is instrumented right after the framework
is imported (and never before), once whichever thread imports it, and a failing instrument() leaves the import
working and says why."""

from __future__ import annotations

import importlib.resources
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import groundtrace.monitor.launcher as launcher

HOOK_FILE = launcher.BOOTSTRAP / "groundtrace_import_hook.py"


@pytest.fixture
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("groundtrace_import_hook_under_test", HOOK_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``fake_framework`` and an integration ``fake_integration`` whose instrument() records what it saw."""
    package = tmp_path / "fake_framework"
    package.mkdir()
    (package / "__init__.py").write_text("import time\ntime.sleep(0.05)  # two threads import it at once\nREADY = True\n")
    (package / "data.txt").write_text("a resource\n")
    (tmp_path / "fake_integration.py").write_text(
        "import sys, threading\n"
        "CALLS = []\n"
        "def instrument():\n"
        "    CALLS.append((sys.modules['fake_framework'].READY, threading.current_thread().name))\n"
        "def broken():\n"
        "    raise RuntimeError('no such setting')\n")
    # an integration the application imports itself: it imports the framework before its instrument() exists
    (tmp_path / "fake_integration_first.py").write_text(
        "import fake_framework\nCALLS = []\n"
        "def instrument():\n    CALLS.append(fake_framework.READY)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("fake_framework", "fake_integration", "fake_integration_first"):
        sys.modules.pop(name, None)


@pytest.fixture
def installed(hook: ModuleType) -> Iterator[list]:
    finders: list = []
    yield finders
    for finder in finders:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)


def test_the_integration_is_instrumented_after_the_framework_is_imported_once_from_any_thread(
        hook, framework, installed) -> None:
    finder = hook.install([("fake_framework", "fake_integration:instrument")])
    installed.append(finder)
    assert "fake_integration" not in sys.modules  # nothing until the application imports the framework
    threads = [threading.Thread(target=__import__, args=("fake_framework",)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    import fake_integration  # type: ignore[import-not-found]

    assert len(fake_integration.CALLS) == 1 and fake_integration.CALLS[0][0] is True  # after its code ran
    assert finder.waiting == []
    # the framework keeps its own loader: its resources read as without the hook
    import fake_framework  # type: ignore[import-not-found]

    # (the loader another import hook of the process may have put in place, beartype's say: never ours)
    assert not isinstance(fake_framework.__loader__, hook._Instrumenting)
    assert fake_framework.__spec__.loader is fake_framework.__loader__
    assert importlib.resources.files("fake_framework").joinpath("data.txt").read_text() == "a resource\n"


def test_an_integration_that_imports_its_framework_itself_is_instrumented_once_its_import_ends(
        hook, framework, installed, caplog) -> None:
    installed.append(hook.install([("fake_framework", "fake_integration_first:instrument")]))
    with caplog.at_level("WARNING"):
        import fake_integration_first  # type: ignore[import-not-found]

    assert fake_integration_first.CALLS == [True] and installed[0].waiting == []
    assert "could not instrument" not in caplog.text


def test_a_framework_imported_already_is_instrumented_at_once(hook, framework, installed) -> None:
    import fake_framework  # noqa: F401
    import fake_integration

    assert hook.install([("fake_framework", "fake_integration:instrument")]) is None  # nothing left to wait for
    assert len(fake_integration.CALLS) == 1


def test_a_failing_instrument_leaves_the_import_working_and_says_why(hook, framework, installed, caplog) -> None:
    installed.append(hook.install([("fake_framework", "fake_integration:broken")]))
    with caplog.at_level("WARNING", logger="groundtrace.monitor.autoinstrument"):
        import fake_framework

    assert fake_framework.READY is True
    assert "could not instrument fake_framework (fake_integration:broken): RuntimeError: no such setting" in caplog.text


def test_the_variable_is_parsed_and_installs_the_hook(hook, framework, installed, monkeypatch) -> None:
    """GROUNDTRACE_ENABLED is config.py's to read: the hook installs whatever it says, and an integration's
    instrument() does nothing where it is off (tests/test_launcher.py runs that through the real launcher)."""
    assert hook.parse(" a.b=m:f, bad, *=p:q ,=x:y") == [("a.b", "m:f"), ("*", "p:q")]
    monkeypatch.delenv(hook.VARIABLE, raising=False)
    assert hook.install_from_environment() is False  # no variable: the caller instruments everything, as before
    monkeypatch.setenv(hook.VARIABLE, "fake_framework=fake_integration:instrument")
    before = list(sys.meta_path)
    assert hook.install_from_environment() is True
    installed.extend(finder for finder in sys.meta_path if finder not in before)  # taken out after the test
    assert [type(finder).__name__ for finder in installed] == ["InstrumentOnImport"]


def test_the_launcher_hands_each_framework_its_integration() -> None:
    pairs = dict(hook_pair.split("=") for hook_pair in launcher.instrument_on_import().split(","))
    assert pairs["langchain_core"] == "groundtrace_langchain:instrument"
    assert pairs["llama_index.core"] == "groundtrace_llamaindex:instrument"
    assert "*" not in pairs  # both integrations name their framework: neither is imported at start
