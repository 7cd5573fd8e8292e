"""Every python and bash snippet of the docs site runs, page by page, in order (see tests/docs/snippets.py)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from tests.docs.snippets import DATA, DOCS, ROOT, SHOWN, fences, page_id, pages, snippet_environment, sybil

KNOWN = {"python", "bash", *DATA}


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_page_snippets_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network_guard) -> None:
    env = snippet_environment(Path(sys.executable).parent)
    environ = dict(os.environ)  # a page may point an SDK at its loopback server: none of it outlives the page
    for key in list(os.environ):
        if key.startswith(("GROUNDTRACE_", "OPENAI_")):
            monkeypatch.delenv(key)
    for key in ("HF_HUB_OFFLINE", "NO_COLOR", "COLUMNS"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    try:  # as a process started with HF_HUB_OFFLINE=1 (huggingface_hub reads it once, at its import)
        from huggingface_hub import constants
    except ImportError:
        pass
    else:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "groundtrace").symlink_to(ROOT, target_is_directory=True)
    document = sybil().parse(page)
    document.namespace["__snippet_env__"] = env
    document.namespace["__name__"] = "__main__"  # as the reader runs it: a script (Flask(__name__), Django views)
    ran = 0
    try:
        for example in document:
            example.evaluate()
            ran += 1
    finally:
        # a page that instruments a framework or starts a Monitor cleans up in an invisible block; whatever is
        # left is closed here so the next page starts clean
        cleanup = document.namespace.get("__cleanup__")
        if callable(cleanup):
            cleanup()
        logging.getLogger("groundtrace").handlers.clear()
        os.environ.clear()
        os.environ.update(environ)
        # the LangSmith SDK caches what it read of the environment (its project, endpoint, flags)
        for cached in getattr(sys.modules.get("langsmith.utils"), "__dict__", {}).values():
            if callable(getattr(cached, "cache_clear", None)):
                cached.cache_clear()
    code = [info for _, info in fences(page) if info in {"python", "bash"}]
    assert ran >= len(code), f"{page_id(page)}: {len(code)} code blocks, {ran} ran"


def test_every_fence_is_known() -> None:
    """No block escapes the suite under a language the harness does not run, save or parse."""
    unknown = []
    for page in pages():
        for line, info in fences(page):
            language = info.split(" ", 1)[0]
            titled = ' title="' in info
            if language not in KNOWN or (titled and language in {"python", "bash"}) or (
                    not titled and info != language):
                unknown.append(f"{page_id(page)}:{line}: ```{info}")
    assert not unknown, "blocks the suite would not run (use python, bash, text, or a titled data file):\n" + "\n".join(unknown)


def test_the_site_has_pages() -> None:
    assert (DOCS / "index.md").exists() and len(pages()) > 10
    assert SHOWN <= DATA
