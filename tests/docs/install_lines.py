"""What the docs' install lines must hold, read from the code rather than restated: the extra a feature's
MissingExtraError names when its packages are not installed (tried with them hidden), and the extras a page's
`pip install` lines name. The get-started pages and the install page check themselves with these."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from groundtrace.errors import MissingExtraError
from tests.docs.snippets import DOCS

EXTRA = re.compile(r"\[([\w-]+)\]'?$")  # the extra the install hint ends with (errors.install_hint)


@contextmanager
def hidden(*packages: str) -> Iterator[None]:
    """``packages`` (and their submodules) not importable for a while, as on a machine without them."""
    saved = {name: module for name, module in sys.modules.items()
             if any(name == p or name.startswith(p + ".") for p in packages)}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(dict.fromkeys(packages))
    try:
        yield
    finally:
        for name in packages:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def extra_needed(build: Callable[[], Any], *packages: str) -> str:
    """The extra that ``build()`` names in its MissingExtraError when ``packages`` are not installed."""
    with hidden(*packages):
        try:
            build()
        except MissingExtraError as error:
            [extra] = EXTRA.findall(str(error))
            return extra
    raise AssertionError(f"{build} built without {packages}")


def page_extras(page: str, section: str = "## 1. Install") -> set[str]:
    """The core's extras the ```bash pip install lines of ``section`` on ``page`` install."""
    text = (DOCS / page).read_text(encoding="utf-8").split(section, 1)[1].split("\n## ", 1)[0]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) for line in block.splitlines()
             if line.startswith("pip install")]
    return {extra.strip() for line in lines for group in re.findall(r"\./groundtrace\[([\w,\s-]+)\]", line)
            for extra in group.split(",")}
